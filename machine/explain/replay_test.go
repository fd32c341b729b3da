package explain_test

import (
	"testing"
	"time"

	"github.com/tikali/monky-deployd/machine"
	"github.com/tikali/monky-deployd/store"
)

// TestReplayTracesThroughEngine replays each recorded history through a fresh machine: every
// tick begins again, every recorded transition is fired as its event, and the machine must
// land where the box did. A change to the transition table that would have decided otherwise
// fails here.
func TestReplayTracesThroughEngine(t *testing.T) {
	for _, name := range traces {
		t.Run(name, func(t *testing.T) {
			src := loadTrace(t, name).st
			var rec store.Record
			var ticks []store.TickSummary
			entries := map[uint64][]store.Entry{}
			if err := src.View(func(tx store.Tx) error {
				var err error
				if rec, err = tx.Record(); err != nil {
					return err
				}
				return tx.AllEntries(func(e store.Entry) error {
					entries[e.Tick] = append(entries[e.Tick], e)
					return nil
				})
			}); err != nil {
				t.Fatal(err)
			}
			if err := src.View(func(tx store.Tx) (err error) { ticks, err = tx.Ticks(0); return err }); err != nil {
				t.Fatal(err)
			}
			var now time.Time
			fresh := store.NewMemory()
			eng, err := machine.Load(fresh, func() time.Time { return now })
			if err != nil {
				t.Fatal(err)
			}
			fired := 0
			for _, sum := range ticks {
				now = sum.StartedAt
				if _, err := eng.BeginTick(rec.EnvID); err != nil {
					t.Fatal(err)
				}
				for _, e := range entries[sum.Tick] {
					now = e.At
					if string(eng.State()) != e.From {
						t.Fatalf("tick %d: the replayed machine is at %s, the box was at %s before %q", sum.Tick, eng.State(), e.From, e.Event)
					}
					if e.From == e.To {
						continue // a note: no decision of the machine
					}
					if err := eng.Fire(machine.Outcome{Event: e.Event, Code: e.Code, Detail: e.Detail}, e.At); err != nil {
						t.Fatalf("tick %d: %s → %s: %v", sum.Tick, e.From, e.To, err)
					}
					if string(eng.State()) != e.To {
						t.Fatalf("tick %d: %s fired from %s lands in %s, the box went to %s", sum.Tick, e.Event, e.From, eng.State(), e.To)
					}
					fired++
				}
			}
			if got := eng.Record().State; got != rec.State {
				t.Errorf("replay ends in %s, the box's record says %s", got, rec.State)
			}
			if fired == 0 {
				t.Error("the trace holds no transition")
			}
		})
	}
}

// TestFullApplyDecisions pins the decisions of a full apply, step by step.
func TestFullApplyDecisions(t *testing.T) {
	d := loadTrace(t, "full-apply").doc
	var got []string
	for _, tr := range d.Ticks[0].Transitions {
		if tr.From != tr.To {
			got = append(got, tr.Event+":"+tr.To)
		}
	}
	want := []string{"checkin:CheckedIn", "verify:BundleVerified", "lease:Leased", "login:LoggedIn", "stage:Staged",
		"pull:Pulled", "up:Up", "healthy:Healthy", "report:Reported"}
	if len(got) != len(want) {
		t.Fatalf("decisions %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("step %d: %s, want %s", i, got[i], want[i])
		}
	}
	if *d.Ticks[0].Exit != 0 || d.Ticks[0].AppliedSha != d.Ticks[0].DesiredSha || d.Next != "converged" {
		t.Errorf("apply tick: exit %d applied %s desired %s next %q", *d.Ticks[0].Exit, d.Ticks[0].AppliedSha, d.Ticks[0].DesiredSha, d.Next)
	}
}
