//go:build !failpoints

package failpoint

// Hit is inert in this build.
func Hit(string) {}

// Enabled reports whether failpoints are compiled in.
const Enabled = false
