package testkit

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// RequireToolsEnv, set to 1, makes every optional tool a requirement: a check whose tool is
// missing fails instead of being skipped (.ci/run sets it, and installs the tools).
const RequireToolsEnv = "MONKY_REQUIRE_TOOLS"

// SkippedChecksEnv names a file to which every skipped optional check appends one line
// (`make test` lists them when it ends).
const SkippedChecksEnv = "MONKY_SKIPPED_CHECKS"

// Tool returns the path of name, a program an optional check needs (pkg: the Debian package
// that installs it). When it is missing, check says what goes unchecked: the test fails under
// MONKY_REQUIRE_TOOLS=1; otherwise the miss is logged, appended to $MONKY_SKIPPED_CHECKS and ""
// is returned, and the caller skips the check (t.Skip, or a narrower check of its own).
func Tool(tb testing.TB, name, pkg, check string) string {
	tb.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	if os.Getenv(RequireToolsEnv) == "1" {
		tb.Fatalf("%s is not installed and %s=1: %s is required (apt-get install %s)", name, RequireToolsEnv, check, pkg)
		return ""
	}
	line := fmt.Sprintf("%s: %s not installed (apt-get install %s)", check, name, pkg)
	tb.Log("skipped: " + line)
	if f := os.Getenv(SkippedChecksEnv); f != "" {
		if out, err := os.OpenFile(f, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644); err == nil {
			_, _ = fmt.Fprintln(out, line)
			_ = out.Close()
		}
	}
	return ""
}
