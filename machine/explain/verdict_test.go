package explain_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/internal/vocab"
	"github.com/tikali/monky-deployd/machine"
	"github.com/tikali/monky-deployd/machine/explain"
	"github.com/tikali/monky-deployd/store"
)

// TestOneVerdict: each kind of box reads one verdict, with every active code: what needs a
// person (docs/OPERATIONS.md, "The one verdict") does, and what clears by itself does not.
func TestOneVerdict(t *testing.T) {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	a, b := strings.Repeat("a", 64), strings.Repeat("b", 64)
	ex := func(n int) *int { return &n }
	tick := func(n uint64, start time.Time, exit int) store.TickSummary {
		return store.TickSummary{Tick: n, StartedAt: start, EndedAt: start, Exit: ex(exit)}
	}
	note := func(n uint64, when time.Time, st, event string, code vocab.Code, detail string) store.Entry {
		return store.Entry{Tick: n, At: when, From: st, To: st, Event: event, Code: code, Detail: detail}
	}
	reported := store.Record{EnvID: "env-a", State: string(machine.Reported), Tick: 3, Action: vocab.ActionNone, AppliedSha: a, DesiredSha: a,
		LastTickAt: at, LastCheckinAt: at, Token: store.TokenMeta{Present: true, Source: "lease", ExpiresAt: at.Add(20 * time.Hour)}}
	healthy := []store.TickSummary{tick(3, at, 0)}
	// a run of exit 75 on OpenBao, from start to the newest tick at `at`
	baoDown := func(start time.Time) explain.Input {
		rec := reported
		rec.State, rec.Action, rec.Sha = string(machine.BundleVerified), vocab.ActionApply, b
		rec.DesiredSha = b
		var ts []store.TickSummary
		es := map[uint64][]store.Entry{}
		for i, s := 0, start; !s.After(at); i, s = i+1, s.Add(10*time.Minute) {
			n := uint64(10 + i)
			ts = append(ts, tick(n, s, 75))
			es[n] = []store.Entry{note(n, s, "BundleVerified", machine.NoteLeaseDeferred, vocab.BaoUnavailable, "bao lookup-self: OpenBao unreachable (503)")}
		}
		return explain.Input{Rec: rec, Recent: ts, Entries: es, Now: at}
	}
	cases := []struct {
		name    string
		in      explain.Input
		verdict string
		codes   []string
	}{
		{"converged", explain.Input{Rec: reported, Recent: healthy, Now: at.Add(time.Minute)}, explain.Converged, nil},
		{"refused", explain.Input{Rec: func() store.Record {
			r := reported
			r.State, r.Action, r.Sha = string(machine.Refused), vocab.ActionApply, b
			r.Refusal = &store.Refusal{Sha: b, Code: "ROLLBACK_REFUSED", Detail: "x", At: at}
			return r
		}(), Recent: []store.TickSummary{tick(3, at, 1)}, Now: at}, explain.NeedsPerson, []string{"ROLLBACK_REFUSED"}},
		{"blocked", explain.Input{Rec: func() store.Record {
			r := reported
			r.State, r.Block = string(machine.Blocked), &store.Block{Code: vocab.AgentUnauthenticated, Detail: "bearer refused", At: at}
			return r
		}(), Recent: []store.TickSummary{tick(3, at, 1)}, Now: at}, explain.NeedsPerson, []string{string("AGENT_UNAUTHENTICATED")}},
		{"failed, backoff", explain.Input{Rec: func() store.Record {
			r := reported
			r.State, r.Action, r.Sha, r.Attempts, r.NextRetryAt = string(machine.Failed), vocab.ActionApply, b, map[string]int{"Pulled": 1}, at.Add(2*time.Minute)
			r.Failure = &store.Failure{Sha: b, Code: vocab.ComposePullFailed, Detail: "pull", State: "Staged", At: at}
			return r
		}(), Recent: []store.TickSummary{tick(3, at, 1)}, Now: at}, explain.Working, []string{"COMPOSE_PULL_FAILED"}},
		{"failed, parked", explain.Input{Rec: func() store.Record {
			r := reported
			r.State, r.Action, r.Sha, r.Attempts, r.Parked = string(machine.Failed), vocab.ActionApply, b, map[string]int{"Pulled": 5}, true
			r.Failure = &store.Failure{Sha: b, Code: vocab.ComposePullFailed, Detail: "pull", State: "Staged", At: at}
			return r
		}(), Recent: []store.TickSummary{tick(3, at, 1)}, Now: at}, explain.NeedsPerson, []string{"COMPOSE_PULL_FAILED"}},
		{"unhealthy heartbeat", explain.Input{Rec: func() store.Record {
			r := reported
			r.State = string(machine.Failed)
			r.Failure = &store.Failure{Sha: a, Code: vocab.Unhealthy, Detail: "api (running/unhealthy)", State: "CheckedIn", At: at}
			r.LastReport = &store.LastReport{Result: effects.ResultFailed, Sha: a, At: at, Detail: "UNHEALTHY: api"}
			return r
		}(), Recent: []store.TickSummary{tick(3, at, 1)}, Now: at}, explain.NeedsPerson, []string{"UNHEALTHY"}},
		{"OpenBao down 20 minutes", baoDown(at.Add(-20 * time.Minute)), explain.Working, []string{"BAO_UNAVAILABLE"}},
		{"OpenBao down 40 minutes", baoDown(at.Add(-40 * time.Minute)), explain.NeedsPerson, []string{"BAO_UNAVAILABLE"}},
		{"stale: the timer stopped", explain.Input{Rec: reported, Recent: healthy, Now: at.Add(6 * time.Minute)}, explain.NeedsPerson, []string{"TICKS_STOPPED"}},
		{"not stale while a tick holds the lock", explain.Input{Rec: reported, Recent: healthy, Now: at.Add(6 * time.Minute), Limits: explain.Limits{TickRunning: true}}, explain.Converged, nil},
		{"stale_after_s from the config", explain.Input{Rec: reported, Recent: healthy, Now: at.Add(6 * time.Minute), Limits: explain.Limits{StaleAfter: 10 * time.Minute}}, explain.Converged, nil},
		{"a dying token beside a refused one, the budget spent", explain.Input{Rec: func() store.Record {
			r := reported
			r.Token = store.TokenMeta{Present: true, Source: "bootstrap", ExpiresAt: at.Add(time.Minute), CheckedAt: at}
			return r
		}(), Used: 5, Frees: at.Add(30 * time.Minute),
			Recent: []store.TickSummary{tick(2, at.Add(-time.Minute), 0), tick(3, at, 0)},
			Entries: map[uint64][]store.Entry{
				2: {note(2, at.Add(-time.Minute), "CheckedIn", machine.NoteUnauthenticated, vocab.BaoPermissionDenied, "OpenBao refused the token")},
				3: {note(3, at, "CheckedIn", machine.NoteUnauthenticated, vocab.BaoPermissionDenied, "OpenBao refused the token")}},
			Now: at}, explain.NeedsPerson, []string{"BAO_PERMISSION_DENIED", "TOKEN_EXPIRING", "LEASE_BUDGET"}},
		{"lease budget refilling", explain.Input{Rec: func() store.Record {
			r := reported
			r.State, r.Action, r.Sha = string(machine.BundleVerified), vocab.ActionApply, b
			return r
		}(), Used: 5, Frees: at.Add(30 * time.Minute), Recent: []store.TickSummary{tick(3, at, 0)}, Now: at}, explain.Working, []string{"LEASE_BUDGET"}},
		{"tenancy refused a lease (429)", explain.Input{Rec: func() store.Record {
			r := reported
			r.State, r.Action, r.Sha, r.LeaseRetryAfter = string(machine.BundleVerified), vocab.ActionApply, b, at.Add(time.Hour)
			return r
		}(), Recent: []store.TickSummary{tick(3, at, 75)}, Entries: map[uint64][]store.Entry{
			3: {note(3, at, "BundleVerified", machine.NoteLeaseDeferred, vocab.LeaseRateLimited, "lease (HTTP 429): 0 leases per environment per hour")}},
			Now: at}, explain.Working, []string{"LEASE_RATE_LIMITED"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := explain.Decide(c.in)
			if v.Verdict != c.verdict || !slices.Equal(v.Codes, c.codes) {
				t.Fatalf("verdict %s codes %v, want %s %v\nnext: %s", v.Verdict, v.Codes, c.verdict, c.codes, v.Next)
			}
			if v.NeedsPerson() != (c.verdict == explain.NeedsPerson) || v.Converged != (c.verdict == explain.Converged) {
				t.Errorf("NeedsPerson %v Converged %v for %s", v.NeedsPerson(), v.Converged, c.verdict)
			}
			if v.Why != nil && (v.Why.Verdict != c.verdict || v.Why.Since.IsZero()) {
				t.Errorf("why verdict %q since %v", v.Why.Verdict, v.Why.Since)
			}
			if len(v.Also) != max(0, len(c.codes)-1) {
				t.Errorf("%d other why blocks for codes %v", len(v.Also), c.codes)
			}
			// a temporary fault that lasted past stuck_after_s needs a person, but it still clears
			// by itself: the words must not say it will not
			if c.name == "OpenBao down 40 minutes" && (v.Why == nil || strings.Contains(v.Why.Next, "will not clear") ||
				!strings.Contains(v.Why.Next, "past stuck_after_s") || !strings.Contains(v.Why.Next, "clears by itself")) {
				t.Errorf("OpenBao down past stuck_after_s: next %q", v.Why.Next)
			}
		})
	}
}

// TestStaleBoxNamesTheTimer: a box whose timer stopped reads needs a person, its why names the
// timer's command and the last tick's time, and its next says it is not converged.
func TestStaleBoxNamesTheTimer(t *testing.T) {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	exit := 0
	in := explain.Input{Rec: store.Record{EnvID: "env-a", State: string(machine.Reported), Tick: 3, Action: vocab.ActionNone,
		AppliedSha: strings.Repeat("a", 64), LastTickAt: at, LastCheckinAt: at},
		Recent: []store.TickSummary{{Tick: 3, StartedAt: at, EndedAt: at, Exit: &exit}}, Now: at.Add(20 * time.Minute)}
	v := explain.Decide(in)
	if v.Why == nil || v.Why.Code != vocab.TicksStopped {
		t.Fatalf("why %+v", v.Why)
	}
	for _, want := range []string{"systemctl status monky-deployd.timer"} {
		if !strings.Contains(v.Why.Fix, want) {
			t.Errorf("fix %q lacks %q", v.Why.Fix, want)
		}
	}
	if !strings.Contains(v.Why.Evidence, machine.Stamp(at)) || !strings.HasPrefix(v.Next, "not converged: TICKS_STOPPED") {
		t.Errorf("evidence %q next %q", v.Why.Evidence, v.Next)
	}
	if !v.Why.Since.Equal(at) {
		t.Errorf("since %v, want the last tick %v", v.Why.Since, at)
	}
}

// TestWhyOfIsTheReportsWhy: the report's why is the verdict's first why block, in PROTOCOL.md
// §1's shape: strings, since in RFC 3339, the verdict.
func TestWhyOfIsTheReportsWhy(t *testing.T) {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	b := strings.Repeat("b", 64)
	st := store.NewMemory()
	exit := 1
	if err := st.Update(func(tx store.Tx) error {
		if err := tx.PutTick(store.TickSummary{Tick: 3, StartedAt: at, EndedAt: at, Exit: &exit}); err != nil {
			return err
		}
		return tx.PutRecord(store.Record{EnvID: "env-a", State: string(machine.Refused), Tick: 3, Action: vocab.ActionApply, Sha: b, DesiredSha: b, LastTickAt: at,
			Refusal: &store.Refusal{Sha: b, Code: "PRIVILEGED_REFUSED", Detail: "PRIVILEGED_REFUSED: service api: privileged: true", At: at}})
	}); err != nil {
		t.Fatal(err)
	}
	var r *effects.ReportWhy
	var v explain.Verdict
	if err := st.View(func(tx store.Tx) error {
		var err error
		r, v, err = explain.WhyOf(tx, at.Add(time.Minute), explain.Limits{TickRunning: true})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if r == nil || r.Code != "PRIVILEGED_REFUSED" || r.Verdict != explain.NeedsPerson || r.Since != "2026-12-01T12:00:00Z" ||
		r.Fault == "" || r.Next == "" || r.Fix == "" || r.Evidence != "service api: privileged: true" {
		t.Errorf("report why %+v (verdict %+v)", r, v)
	}
}

// TestOpenBaoDownIsNotALeaseWanted: a tick that could not ask OpenBao whether the token in hand
// still works says so, not that the apply needs a new lease (the token was fine and reused).
func TestOpenBaoDownIsNotALeaseWanted(t *testing.T) {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	exit := vocab.ExitTemporary
	in := explain.Input{
		Rec:    store.Record{EnvID: "env-a", State: string(machine.BundleVerified), Tick: 2, Action: vocab.ActionApply, Sha: strings.Repeat("b", 64)},
		Recent: []store.TickSummary{{Tick: 2, StartedAt: at, EndedAt: at, Exit: &exit}},
		Entries: map[uint64][]store.Entry{2: {{Tick: 2, At: at, From: "BundleVerified", To: "BundleVerified", Event: machine.NoteLeaseDeferred,
			Code: vocab.BaoUnavailable, Detail: "bao lookup-self (HTTP 503): Vault is sealed (whether the token is reusable is asked again next tick)"}}},
		Now: at.Add(time.Minute),
	}
	w := explain.Decide(in).Why
	if w == nil || strings.Contains(w.Fault, "needs a new lease") || !strings.Contains(w.Fault, "token in hand") || !strings.Contains(w.Next, "asks OpenBao again") {
		t.Errorf("why %+v", w)
	}
}
