package robust

// The kill sequences that once broke the box, run on every `go test`: each failed before its
// fix (the first two families left `current` pointing at a trashed release; the others cost
// a second lease or login because the next tick deleted a temp file holding a completed write).

import "testing"

var crashFamilies = []struct {
	sc     string
	points []string
}{
	// `current` left pointing at a trashed release: a tick resumed after the swap moved the
	// release `current` resolves to aside, and was killed there
	{"upgrade", []string{"file:current-swapped", "file:release-trashed"}},
	{"upgrade", []string{"before:Staged", "file:release-trashed"}},
	{"first", []string{"file:current-swapped", "file:release-trashed"}},
	{"first", []string{"before:Staged", "file:release-trashed"}},
	// the resumed refresh of that release, killed part-way
	{"upgrade", []string{"file:current-swapped", "file:release-refreshed"}},
	// a temp file left by a kill: a second lease or login
	{"first", []string{"file:tmp-synced:bao.token"}},
	{"first", []string{"file:tmp-synced:lease.grant"}},
	{"first", []string{"file:tmp-synced:bao.token", "file:tmp-synced:lease.grant"}},
	{"first", []string{"file:tmp-synced:bao.token", "file:tmp-synced:bao.token"}},
	{"first", []string{"before:CheckedIn", "file:tmp-synced:bao.token"}},
	{"first", []string{"file:bootstrap-token-written", "file:tmp-synced:bao.token"}},
	{"first", []string{"file:grant-written", "file:tmp-synced:bao.token"}},
	{"first", []string{"file:tmp-synced:lease.grant", "file:token-written"}},
	{"first", []string{"file:tmp-synced:lease.grant", "file:tmp-recovered:lease.grant"}},
	{"first", []string{"file:tmp-synced:bao.token", "file:tmp-recovered:bao.token"}},
	// the bootstrap grant left unconsumed
	{"first", []string{"file:bootstrap-token-written"}},
}

func TestCrashFamilies(t *testing.T) {
	refs := map[string]reference{}
	for _, f := range crashFamilies {
		if _, ok := refs[f.sc]; !ok {
			refs[f.sc] = runReference(t, f.sc)
		}
	}
	r := newRunner(t)
	r.group("families", func() {
		for _, f := range crashFamilies {
			r.run(f.sc, refs[f.sc], f.points, false)
		}
	})
	stats := r.stats
	t.Logf("crash families: %d runs, %d kills, %d second points not reached, %d violations", stats.runs, stats.kills, stats.notReached, len(stats.violations))
	for _, v := range stats.violations {
		t.Error(v)
	}
}
