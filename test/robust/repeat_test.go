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

	"github.com/tikali/monky-deployd/internal/testkit"
)

// timingPoints are the single faults run repeatedly. file:token-written is the one the old
// code lost 10 of 200 times (a second login); the others sit between a token's or a grant's
// write and the commit that follows it, and run a tenth as often as guards (0 of 200 on the
// old code too).
// Runs go two or more at a time (parallel subtests): the timing of each varies all the more.
var timingPoints = []string{"file:token-written", "file:grant-removed", "file:tmp-synced:bao.token", "file:tmp-synced:lease.grant"}

// repeatCount is how often file:token-written runs: MONKY_CRASH_REPEAT, default 25 (`make
// crash` runs 200).
func repeatCount() int {
	if n, err := strconv.Atoi(os.Getenv("MONKY_CRASH_REPEAT")); err == nil && n > 0 {
		return n
	}
	return 25
}

func TestTimingPointsRepeated(t *testing.T) {
	testkit.Heavy(t, "make crash", "the timing points repeated")
	n := repeatCount()
	ref := runReference(t, "first")
	r := newRunner(t)
	for i, p := range timingPoints {
		runs := n
		if i > 0 {
			runs = max(n/10, 2)
		}
		mark := len(r.stats.violations)
		r.group(p, func() {
			for k := 0; k < runs; k++ {
				r.run("first", ref, []string{p}, true)
			}
		})
		t.Logf("timing point %s: %d runs, %d violations", p, runs, len(r.stats.violations)-mark)
	}
	stats := r.stats
	t.Logf("timing points: %d runs, %d kills, %d violations", stats.runs, stats.kills, len(stats.violations))
	for i, v := range stats.violations {
		if i == 10 {
			t.Errorf("… and %d more", len(stats.violations)-10)
			break
		}
		t.Error(v)
	}
}
