package explain_test

import (
	"strings"
	"testing"
	"time"

	"github.com/tikali/monky-deployd/internal/vocab"
	"github.com/tikali/monky-deployd/machine"
	"github.com/tikali/monky-deployd/machine/explain"
	"github.com/tikali/monky-deployd/store"
)

// TestUnwritableReadsRedAtOnce: a box whose own dirs cannot be written now reads needs a person
// with STATE_UNWRITABLE and the words of the probe, whatever its record says (a tick that cannot
// commit cannot journal it); a writable dir and a dir not made yet probe as nothing.
func TestUnwritableReadsRedAtOnce(t *testing.T) {
	if got := explain.Unwritable(t.TempDir(), "", t.TempDir()+"/not-yet"); got != "" {
		t.Fatalf("a writable temp dir probes as %q, want nothing", got)
	}
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	a := strings.Repeat("a", 64)
	exit := 0
	in := explain.Input{Rec: store.Record{EnvID: "env-a", State: string(machine.Reported), Tick: 3, Action: vocab.ActionNone, AppliedSha: a, DesiredSha: a,
		LastTickAt: at, LastCheckinAt: at, Token: store.TokenMeta{Present: true, Source: "lease", ExpiresAt: at.Add(20 * time.Hour)}},
		Recent: []store.TickSummary{{Tick: 3, StartedAt: at, EndedAt: at, Exit: &exit}}, Now: at.Add(time.Minute)}
	if v := explain.Decide(in); v.Verdict != explain.Converged {
		t.Fatalf("the healthy box reads %s %v", v.Verdict, v.Codes)
	}
	in.Limits.Unwritable = "/var/lib/monky-deployd: no space left on the device (4096 bytes free)"
	v := explain.Decide(in)
	if v.Verdict != explain.NeedsPerson || v.Why == nil || v.Why.Code != vocab.StateUnwritable ||
		!strings.Contains(v.Why.Evidence, "4096 bytes free") || !strings.Contains(v.Why.Fix, "df -h") {
		t.Fatalf("a full state_dir reads %s %v, why %+v", v.Verdict, v.Codes, v.Why)
	}
}
