package helpers

// Internals opened to the external tests of this package.

var (
	CallerPackage = callerPackage
	TestPackage   = testPackage
)

// ForceArtifacts makes a failing test write its artifacts (or not) whatever
// the -test.artifacts flag says.
func ForceArtifacts(on bool) Option {
	return func(c *config) { c.artifacts = &on }
}
