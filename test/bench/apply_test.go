// Package bench holds the performance benchmarks and programs of monky-deployd (see
// docs/PERFORMANCE.md): the timing targets live here and in scripts/bench.sh, never in tests.
package bench

import (
	"fmt"
	"testing"
	"time"

	"github.com/tikali/monky-deployd/store"
	"github.com/tikali/monky-deployd/test/bench/rig"
)

// BenchmarkApply100Files applies a new 100-file release per iteration, in process, with the
// wall clock, and reports the agent-side time: the sum of the apply tick's journal
// per-transition ms minus the time spent inside the effects (tenancy, OpenBao, compose, disk),
// which rig.Waits measures around every call.
func BenchmarkApply100Files(b *testing.B) {
	w, err := rig.NewWorld(rig.Options{Dir: b.TempDir(), RealTime: true, LeaseLimit: 1 << 30})
	if err != nil {
		b.Fatal(err)
	}
	extra := map[string][]byte{}
	for i := 0; i < 96; i++ { // + compose.yaml, .env.template, manifest, config/app.toml = 100
		extra[fmt.Sprintf("config/part-%03d.conf", i)] = make([]byte, 2048)
	}
	var journalSum, waits, wall time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		if _, err := w.Release(fmt.Sprintf("r%05d", i), extra); err != nil {
			b.Fatal(err)
		}
		w.Waits.Reset()
		b.StartTimer()
		t := time.Now()
		res := w.Tick()
		wall += time.Since(t)
		b.StopTimer()
		if res.Exit != 0 {
			b.Fatalf("apply %d: exit %d: %v", i, res.Exit, res.Err)
		}
		waits += w.Waits.Total()
		ms, err := lastTickSum(w.Store)
		if err != nil {
			b.Fatal(err)
		}
		journalSum += ms
		b.StartTimer()
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(float64(journalSum.Milliseconds())/n, "journal-ms/apply")
	b.ReportMetric(float64(waits.Microseconds())/1000/n, "effects-ms/apply")
	b.ReportMetric(float64((wall-waits).Microseconds())/1000/n, "agent-ms/apply")
	b.ReportMetric(max(float64((journalSum-waits).Microseconds())/1000/n, 0), "journal-agent-ms/apply")
}

// lastTickSum sums the per-transition ms of the newest tick's journal entries.
func lastTickSum(st store.Store) (time.Duration, error) {
	var total int64
	err := st.View(func(tx store.Tx) error {
		ts, err := tx.Ticks(1)
		if err != nil || len(ts) == 0 {
			return err
		}
		es, err := tx.Entries(ts[0].Tick)
		for _, e := range es {
			total += e.Ms
		}
		return err
	})
	return time.Duration(total) * time.Millisecond, err
}
