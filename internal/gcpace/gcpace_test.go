package gcpace

import (
	"os"
	"runtime/debug"
	"testing"
)

// The process runs at Percent from its start, and Long gives it Go's default back; GOGC in the
// environment is left alone by both.
func TestPace(t *testing.T) {
	if os.Getenv("GOGC") != "" {
		t.Skip("GOGC is set in the environment: the pace is its")
	}
	got := debug.SetGCPercent(Percent)
	if got != Percent {
		t.Errorf("GOGC at start: %d, want %d", got, Percent)
	}
	Long()
	if got := debug.SetGCPercent(Percent); got != longPercent {
		t.Errorf("GOGC after Long: %d, want %d", got, longPercent)
	}
	t.Setenv("GOGC", "50")
	debug.SetGCPercent(50)
	Long()
	if got := debug.SetGCPercent(Percent); got != 50 {
		t.Errorf("GOGC after Long with GOGC=50 set: %d, want 50", got)
	}
}
