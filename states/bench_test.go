package states_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/store"
)

// quietCompose answers ps with two healthy containers, in process (no exec per tick).
type quietCompose struct{}

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

// countingStore counts the transactions that write (each is an fsync on a box).
type countingStore struct {
	store.Store
	updates int
}

func (c *countingStore) Update(fn func(store.Tx) error) error {
	c.updates++
	return c.Store.Update(fn)
}

// A converged heartbeat tick commits four times: the check-in's transition (with the tick's
// header and the check-in facts, which need no commit of their own), the healthy transition
// with its queued report, the report's acknowledgement, and the tick's end.
func TestAHeartbeatTickCommitsFourTimes(t *testing.T) {
	h := newHarness(t)
	h.release("v1", nil)
	h.wantExit(h.tick(), 0)
	cs := &countingStore{Store: h.st}
	a := h.agent()
	a.Store = cs
	a.Fx.Compose = quietCompose{}
	if res := a.Tick(context.Background()); res.Exit != 0 {
		t.Fatalf("exit %d: %v", res.Exit, res.Err)
	}
	if cs.updates != 4 {
		t.Errorf("%d commits in a heartbeat tick, want 4", cs.updates)
	}
}
