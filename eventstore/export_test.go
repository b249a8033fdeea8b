package eventstore

// AppendsSQL is the shared-append statement, for the test of its plan.
const AppendsSQL = appendsSQL
