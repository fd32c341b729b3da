package explain_test

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tikali/monky-deployd/internal/vocab"
	"github.com/tikali/monky-deployd/machine"
	"github.com/tikali/monky-deployd/machine/explain"
	"github.com/tikali/monky-deployd/store"
)

// TestEveryCodeIsExplained: whatever code of the vocabulary the agent journals a failure with
// (every code the agent raises is one: the compiler sees to that, and internal/vocab's tests to
// its row), explain says what it means and what to do, never an empty fault or the fix "run
// explain again"; a code of tenancy's that the agent does not know is said to be one.
func TestEveryCodeIsExplained(t *testing.T) {
	codes := append(vocab.Codes(), "TENANCYS_OWN_CODE") // a code of tenancy's that no release of the agent knows
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	exit := vocab.ExitFail
	for _, code := range codes {
		in := explain.Input{
			Rec: store.Record{EnvID: "env-a", State: string(machine.Failed), Tick: 2, Action: vocab.ActionApply,
				DesiredSha: strings.Repeat("b", 64), AppliedSha: strings.Repeat("a", 64),
				Failure: &store.Failure{Sha: strings.Repeat("b", 64), Code: code, Detail: string(code) + ": the step's words", State: string(machine.Staged), At: at}},
			Recent: []store.TickSummary{{Tick: 2, StartedAt: at, EndedAt: at, Exit: &exit}},
			Now:    at.Add(time.Minute),
		}
		w := explain.Decide(in).Why
		if w == nil || w.Code != code || w.Fault == "" || w.Fix == "" || strings.Contains(w.Fix, "jq .why") {
			t.Errorf("%s: why = %+v, want the fault in words and a fix", code, w)
		}
	}
}

// TestEveryStopNoteIsExplained: a tick that ended 75 on any of the vocabulary's stop notes, with
// no code of its own, reads in explain as that note's fault, named after it, with what the
// next tick does.
func TestEveryStopNoteIsExplained(t *testing.T) {
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	exit := vocab.ExitTemporary
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
			if w == nil || string(w.Code) != want || w.Fault == "" || !strings.Contains(w.Evidence, "the fault's own words") || !strings.Contains(w.Next, "next tick") {
				t.Fatalf("why = %+v, want code %s, a fault, the note's words and the next tick", w, want)
			}
		})
	}
}

// TestCodesMatchDocs: docs/OPERATIONS.md's table of every code is the one explain words them
// from. With -update it rewrites the block between the marker lines.
func TestCodesMatchDocs(t *testing.T) {
	const doc, begin, end = "../../docs/OPERATIONS.md", "<!-- codes:begin -->\n", "<!-- codes:end -->"
	raw, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	b, e := bytes.Index(raw, []byte(begin)), bytes.Index(raw, []byte(end))
	if b < 0 || e < b || bytes.Count(raw, []byte(begin)) != 1 {
		t.Fatalf("%s: the marker lines %q and %q are missing, repeated or out of order", doc, begin, end)
	}
	got, want := string(raw[b+len(begin):e]), explain.CodesMarkdown()
	if got == want {
		return
	}
	if *update {
		out := append(append(append([]byte{}, raw[:b+len(begin)]...), want...), raw[e:]...)
		if err := os.WriteFile(doc, out, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s's codes table differs from explain's words; run: go test ./machine/explain -update", doc)
}
