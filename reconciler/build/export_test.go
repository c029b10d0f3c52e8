package build

// LoadsOwnSchema is loadsOwnSchema, for the tests.
var LoadsOwnSchema = loadsOwnSchema
