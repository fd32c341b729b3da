package explain_test

import (
	"strings"
	"testing"
	"time"

	"github.com/tikali/monky-deployd/internal/explain"
	"github.com/tikali/monky-deployd/machine"
	"github.com/tikali/monky-deployd/store"
)

// TestEveryStopNoteIsExplained: a tick that ended 75 on any of the vocabulary's stop notes, with
// no code of its own, reads in explain as that note's fault, named after it, with what the
// next tick does.
func TestEveryStopNoteIsExplained(t *testing.T) {
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	exit := machine.ExitTemporary
	for _, event := range machine.StopNotes {
		t.Run(event, func(t *testing.T) {
			in := explain.Input{
				Rec:    store.Record{EnvID: "env-a", State: string(machine.Leased), Tick: 2, AppliedSha: strings.Repeat("a", 64), DesiredSha: strings.Repeat("b", 64)},
				Recent: []store.TickSummary{{Tick: 2, StartedAt: at, EndedAt: at, Exit: &exit}},
				Entries: map[uint64][]store.Entry{2: {{Seq: 1, Tick: 2, At: at, From: string(machine.Leased), To: string(machine.Leased),
					Event: event, Detail: "the fault's own words"}}},
				Now: at.Add(time.Minute),
			}
			w := explain.Decide(in).Why
			want := strings.ToUpper(strings.ReplaceAll(event, "-", "_"))
			if w == nil || w.Code != want || w.Fault == "" || !strings.Contains(w.Evidence, "the fault's own words") || !strings.Contains(w.Next, "next tick") {
				t.Fatalf("why = %+v, want code %s, a fault, the note's words and the next tick", w, want)
			}
		})
	}
}
