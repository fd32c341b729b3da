package states_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/effects/docker"
	"github.com/tikali/monky-deployd/store"
)

// quietCompose answers ps with two healthy containers, in process (no exec per tick); the
// release's model is prepared as the agent does.
type quietCompose struct{ docker.Model }

func (quietCompose) PS(context.Context, string) ([]effects.Container, error) {
	return []effects.Container{{Name: "monky-env-qa-02-api-1", Service: "api", State: "running", Health: "healthy"},
		{Name: "monky-env-qa-02-worker-1", Service: "worker", State: "running"}}, nil
}
func (quietCompose) Pull(context.Context, string) error                { return nil }
func (quietCompose) Up(context.Context, string) error                  { return nil }
func (quietCompose) Down(context.Context, string, bool) error          { return nil }
func (quietCompose) Logs(context.Context, string, int) (string, error) { return "", nil }
func (quietCompose) DataRoot(context.Context) (string, error)          { return "/var/lib/docker", nil }
func (quietCompose) ImagePrune(context.Context) error                  { return nil }

// BenchmarkHeartbeatTick runs converged heartbeat ticks against the in-process simulator and
// reports the state file's size after them: run with -benchtime=10000x for the figure of
// 10,000 ticks (heartbeats fold, so the file stays small).
func BenchmarkHeartbeatTick(b *testing.B) {
	h := newHarness(b)
	h.release("v1", nil)
	a := h.agent()
	a.Fx.Compose = quietCompose{}
	if res := a.Tick(context.Background()); res.Exit != 0 {
		b.Fatalf("apply: %v", res.Err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		h.clock.Advance(time.Minute)
		if res := a.Tick(context.Background()); res.Exit != 0 {
			b.Fatalf("tick %d: %v", i, res.Err)
		}
	}
	b.StopTimer()
	st, err := os.Stat(h.cfg.StatePath())
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(st.Size()), "state-bytes")
}

// countingStore counts the transactions: each is an open of the state file, and each that
// writes is a commit (an fsync on a box).
type countingStore struct {
	store.Store
	updates, views int
}

func (c *countingStore) Update(fn func(store.Tx) error) error {
	c.updates++
	return c.Store.Update(fn)
}

func (c *countingStore) View(fn func(store.Tx) error) error {
	c.views++
	return c.Store.View(fn)
}

// A converged heartbeat tick opens the state file twice and commits once: it reads before its
// check-in, sends its report, then writes the check-in's, the healthy and the reported
// transitions, their facts and the tick's end in one transaction; and the heartbeat is folded
// into the one before it as ever.
func TestAHeartbeatTickCommitsOnce(t *testing.T) {
	h := newHarness(t)
	h.apply("v1")
	h.wantExit(h.tick(), 0)
	var before []store.TickSummary
	if err := h.st.View(func(tx store.Tx) error { var err error; before, err = tx.Ticks(0); return err }); err != nil {
		t.Fatal(err)
	}
	cs := &countingStore{Store: h.st}
	a := h.agent()
	a.Store = cs
	a.Fx.Compose = quietCompose{}
	if res := a.Tick(context.Background()); res.Exit != 0 {
		t.Fatalf("exit %d: %v", res.Exit, res.Err)
	}
	if cs.updates != 1 || cs.views != 1 {
		t.Errorf("a heartbeat tick: %d commits and %d reads, want 1 and 1", cs.updates, cs.views)
	}
	var rec store.Record
	var after []store.TickSummary
	var entries []store.Entry
	if err := h.st.View(func(tx store.Tx) error {
		var err error
		if rec, err = tx.Record(); err != nil {
			return err
		}
		if after, err = tx.Ticks(0); err != nil {
			return err
		}
		entries, err = tx.Entries(after[len(after)-1].Tick)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if rec.State != "Reported" || rec.LastReport == nil || !rec.LastReport.Acknowledged || rec.LastCheckinAt.IsZero() {
		t.Errorf("after the heartbeat: state %s, last report %+v, last check-in %v", rec.State, rec.LastReport, rec.LastCheckinAt)
	}
	if len(after) != len(before) || after[len(after)-1].Folded != before[len(before)-1].Folded+1 {
		t.Errorf("the heartbeat was not folded into the one before: %d ticks → %d, last %+v", len(before), len(after), after[len(after)-1])
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.From+">"+e.To)
	}
	if len(got) != 3 || got[0] != "Idle>CheckedIn" || got[1] != "CheckedIn>Healthy" || got[2] != "Healthy>Reported" {
		t.Errorf("journal of the heartbeat %v, want Idle>CheckedIn CheckedIn>Healthy Healthy>Reported", got)
	}
}
