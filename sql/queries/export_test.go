package queries

// Load exposes load to the tests.
var Load = load
