package explain_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/tikali/monky-deployd/internal/vocab"
	"github.com/tikali/monky-deployd/machine"
	"github.com/tikali/monky-deployd/machine/explain"
	"github.com/tikali/monky-deployd/store"
)

// pullFailed is a box whose first pull failed at at with reason, read at now.
func pullFailed(reason vocab.Reason, first, at, now time.Time) explain.Input {
	exit := vocab.ExitFail
	detail := "compose pull: Error response from daemon: the registry's words"
	fail := func(tick uint64, when time.Time) store.Entry {
		return store.Entry{Tick: tick, At: when, From: string(machine.Staged), To: string(machine.Failed), Event: machine.EvFail,
			Code: vocab.ComposePullFailed, Reason: reason, Detail: detail}
	}
	in := explain.Input{
		Rec: store.Record{EnvID: "env-a", State: string(machine.Failed), Tick: 2, Action: vocab.ActionApply, Sha: strings.Repeat("a", 64),
			Attempts: map[string]int{string(machine.Staged): 2}, NextRetryAt: at.Add(4 * time.Minute),
			Failure: &store.Failure{Sha: strings.Repeat("a", 64), Code: vocab.ComposePullFailed, Reason: reason, Detail: detail, State: string(machine.Staged), At: at, Limit: 5}},
		Recent:  []store.TickSummary{{Tick: 1, StartedAt: first, EndedAt: first, Exit: &exit}, {Tick: 2, StartedAt: at, EndedAt: at, Exit: &exit}},
		Entries: map[uint64][]store.Entry{1: {fail(1, first)}, 2: {fail(2, at)}},
		Now:     now, Limits: explain.Limits{Paths: boxPaths, StuckAfter: time.Hour},
	}
	return in
}

// A retry that cannot help needs a person at once: a registry that refuses the credential or
// does not hold the image gives every retry the same answer. A network failure is working on
// it until stuck_after_s. The cause is the failure's typed reason, whatever its words say.
func TestPullThatARetryCannotHelpNeedsAPersonAtOnce(t *testing.T) {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name     string
		reason   vocab.Reason
		first    time.Time
		verdict  string
		faultHas string
	}{
		{"the registry refuses the credential", vocab.ReasonRegistryDenied, at, explain.NeedsPerson, "credential"},
		{"the image does not exist", vocab.ReasonImageMissing, at, explain.NeedsPerson, "does not hold an image"},
		{"the network, young", vocab.ReasonNetwork, at, explain.Working, "could not be reached"},
		{"the network, past stuck_after_s", vocab.ReasonNetwork, at.Add(-2 * time.Hour), explain.NeedsPerson, "could not be reached"},
		{"a name that does not resolve, young", vocab.ReasonRegistryDNS, at, explain.Working, "does not resolve"},
		{"a failure written before reasons were kept", "", at, explain.Working, "refused or could not serve"},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := explain.Decide(pullFailed(c.reason, c.first, at, at.Add(time.Minute)))
			if v.Verdict != c.verdict {
				t.Errorf("verdict %s, want %s", v.Verdict, c.verdict)
			}
			if v.Why == nil || v.Why.Code != vocab.ComposePullFailed || !strings.Contains(v.Why.Fault, c.faultHas) {
				t.Fatalf("why %+v", v.Why)
			}
			if c.verdict == explain.NeedsPerson && !strings.Contains(v.Why.Next, "will not clear by waiting") && !strings.Contains(v.Why.Next, "does not clear by waiting") {
				t.Errorf("a box that needs a person is told to wait: %s", v.Why.Next)
			}
		})
	}
}

// A block written before reasons were kept still reads: its code's own words, its recorded
// words as the evidence — never a cause read out of them. The same words with a typed reason
// read as that reason.
func TestBlockWithoutAReasonReadsByItsCode(t *testing.T) {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	exit := vocab.ExitFail
	detail := "no token and the bootstrap grant at /srv/box/etc/grant.jwt is unreadable: open /srv/box/etc/grant.jwt: permission denied"
	in := func(reason vocab.Reason) explain.Input {
		return explain.Input{
			Rec: store.Record{EnvID: "env-a", State: string(machine.Blocked), Tick: 2,
				Block: &store.Block{Code: vocab.AgentUnauthenticated, Reason: reason, At: at, Detail: detail}},
			Recent: []store.TickSummary{{Tick: 2, StartedAt: at, EndedAt: at, Exit: &exit}},
			Now:    at.Add(time.Minute), Limits: explain.Limits{Paths: boxPaths},
		}
	}
	old := explain.Decide(in(""))
	if old.Verdict != explain.NeedsPerson || old.Why == nil || old.Why.Code != vocab.AgentUnauthenticated {
		t.Fatalf("an old block: %+v", old.Why)
	}
	if old.Why.Evidence != detail {
		t.Errorf("evidence %q, want the recorded words", old.Why.Evidence)
	}
	if strings.Contains(old.Why.Fault, "cannot be read") || strings.Contains(old.Why.Fault, "refused") {
		t.Errorf("a cause was read out of the words: %s", old.Why.Fault)
	}
	typed := explain.Decide(in(vocab.ReasonGrantUnreadable))
	if typed.Why == nil || !strings.Contains(typed.Why.Fault, "cannot be read") {
		t.Errorf("a typed block: %+v", typed.Why)
	}
}

// `explain --ndjson` carries the verdict and the codes explain gives, on its header line: a
// ticket's attachment answers the one question without replaying it.
func TestNDJSONCarriesTheVerdict(t *testing.T) {
	for _, name := range []string{"full-apply", "pull-failed", "unauthenticated-blocked", "connection-refused"} {
		t.Run(name, func(t *testing.T) {
			tr := loadTrace(t, name)
			var out bytes.Buffer
			if err := explain.WriteNDJSON(&out, tr.st, tr.now); err != nil {
				t.Fatal(err)
			}
			first, _, _ := bytes.Cut(out.Bytes(), []byte("\n"))
			var hdr explain.Line
			if err := json.Unmarshal(first, &hdr); err != nil || hdr.Type != "header" {
				t.Fatalf("header %s: %v", first, err)
			}
			if hdr.Verdict == "" || hdr.Verdict != tr.doc.Verdict || strings.Join(hdr.Codes, ",") != strings.Join(tr.doc.Codes, ",") {
				t.Errorf("header verdict %q codes %v, explain's %q %v", hdr.Verdict, hdr.Codes, tr.doc.Verdict, tr.doc.Codes)
			}
		})
	}
}
