package local

// Helpers of the internal tests that the external ones (package local_test)
// use.
var (
	BenchEngine = benchEngine
	Domains     = domains
)
