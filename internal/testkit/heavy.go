package testkit

import "testing"

// Heavy marks a test of the heavy tier: `make test` (go test -short, the quick tier a contributor
// runs before every commit) skips it; target is the make target that runs it in full — `make
// test-heavy` (the Makefile's HEAVY_TESTS names it) or a suite's own (`make crash`, `make soak`),
// which .ci/run runs. test/tiers_test.go checks that every heavy test is named by its target.
func Heavy(tb testing.TB, target, why string) {
	tb.Helper()
	if testing.Short() {
		tb.Skipf("heavy tier (%s): %s runs it", why, target)
	}
}
