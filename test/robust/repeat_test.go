package robust

// The points whose outcome once hung on timing, run many times in a row: a kill at
// file:token-written used to cost a second login whenever the token and the kept grant were
// written within one tick of the kernel's file clock (their mtimes equal), because the
// resumed tick compared the two mtimes to decide whether the grant was already consumed.
// The decision now rests on the token's grant_jti (lookup-self) against the kept grant's jti.

import (
	"os"
	"strconv"
	"testing"
)

// timingPoints are the single faults run repeatedly: the kills between the token's rename
// and the transition's commit (and the grant's removal), in the scenario that passes them.
var timingPoints = []string{"file:token-written", "file:grant-removed", "file:tmp-synced:bao.token", "file:tmp-synced:lease.grant"}

// repeatCount is how often each timing point runs (MONKY_CRASH_REPEAT, default 200).
func repeatCount() int {
	if n, err := strconv.Atoi(os.Getenv("MONKY_CRASH_REPEAT")); err == nil && n > 0 {
		return n
	}
	return 200
}

func TestTimingPointsRepeated(t *testing.T) {
	n := repeatCount()
	ref := runReference(t, "first")
	stats := &matrixStats{points: map[string]bool{}}
	for _, p := range timingPoints {
		before := len(stats.violations)
		for i := 0; i < n; i++ {
			crashRun(t, stats, "first", ref, []string{p}, true)
		}
		t.Logf("%s: %d runs, %d violations", p, n, len(stats.violations)-before)
	}
	t.Logf("timing points: %d runs, %d kills, %d violations", stats.runs, stats.kills, len(stats.violations))
	for i, v := range stats.violations {
		if i == 10 {
			t.Errorf("… and %d more", len(stats.violations)-10)
			break
		}
		t.Error(v)
	}
}
