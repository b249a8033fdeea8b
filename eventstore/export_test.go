package eventstore

// AppendsSQL is the shared-append statement, for the test of its plan.
const AppendsSQL = appendsSQL

// GenericPlans is what AppendAll sets before its statements, for the
// tests of the plans they cache.
var GenericPlans = genericPlans

// ReadStreamSQL is a stream's read, for the test of its plan.
const ReadStreamSQL = qReadStream

// InBracket is the mark of the statements AppendAll and QueueReadStreams
// send on generic plans.
const InBracket = inBracket
