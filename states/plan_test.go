package states

import (
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/machine"
	"github.com/tikali/monky-deployd/store"
)

// The pure plans of the steps, decided from what a step read, with no simulator.

// jwt is an unsigned grant with the claims jti and exp (0: none).
func jwt(jti string, exp int64) string {
	claims := fmt.Sprintf(`{"jti":%q,"exp":%d}`, jti, exp)
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"none"}`)) + "." + enc([]byte(claims)) + ".sig"
}

var planNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func TestPlanLogin(t *testing.T) {
	live, expired := jwt("g1", planNow.Add(time.Hour).Unix()), jwt("g1", planNow.Add(-time.Hour).Unix())
	temp := &effects.Error{Op: "bao lookup-self", Kind: effects.Temporary, Msg: "503"}
	perm := &effects.Error{Op: "bao lookup-self", Kind: effects.Permanent, Msg: "403"}
	for _, c := range []struct {
		name string
		in   loginInput
		want loginPlan
	}{
		{name: "a fresh lease's grant: log in", in: loginInput{grant: live}, want: loginPlan{}},
		{name: "no token to ask about: log in", in: loginInput{grant: live, leaseJTI: "g1"}, want: loginPlan{}},
		{name: "the token is the kept grant's: done, grant consumed",
			in:   loginInput{grant: live, looked: true, info: effects.TokenInfo{GrantJTI: "g1"}},
			want: loginPlan{done: true, consume: true, detail: "logged in before a restart"}},
		{name: "grant gone, the token is the lease's: done",
			in:   loginInput{leaseJTI: "g1", looked: true, info: effects.TokenInfo{GrantJTI: "g1"}},
			want: loginPlan{done: true, consume: true, detail: "logged in before a restart"}},
		{name: "the token is another grant's: log in", in: loginInput{grant: live, looked: true, info: effects.TokenInfo{GrantJTI: "g0"}}, want: loginPlan{}},
		{name: "OpenBao cannot say now: stop", in: loginInput{grant: live, looked: true, lookupErr: temp}, want: loginPlan{stop: true}},
		{name: "OpenBao refuses the lookup: log in", in: loginInput{grant: live, looked: true, lookupErr: perm}, want: loginPlan{}},
		{name: "a state file from before lease_jti, a token of an unknown grant: done",
			in:   loginInput{looked: true, tokenGrantJTI: "g0", info: effects.TokenInfo{GrantJTI: "g9"}},
			want: loginPlan{done: true, detail: "logged in before a restart"}},
		{name: "before lease_jti, the token the record knows: lease again",
			in: loginInput{looked: true, tokenGrantJTI: "g0", info: effects.TokenInfo{GrantJTI: "g0"}}, want: loginPlan{lease: true}},
		{name: "the kept grant expired: lease again", in: loginInput{grant: expired}, want: loginPlan{lease: true}},
		{name: "no grant: lease again", in: loginInput{}, want: loginPlan{lease: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.in.now = planNow
			if got := planLogin(c.in); got != c.want {
				t.Fatalf("plan %+v, want %+v", got, c.want)
			}
		})
	}
}

func TestPlanRollback(t *testing.T) {
	v1, v2 := strings.Repeat("1", 64), strings.Repeat("2", 64)
	at := planNow.Add(-24 * time.Hour)
	for _, c := range []struct {
		name                 string
		sha, applied         string
		before, allow        bool
		wantRefuse, wantNote bool
		refuseHas, noteHas   string
	}{
		{name: "the sha applied now", sha: v1, applied: v1, before: true},
		{name: "never applied here", sha: v2, applied: v1},
		{name: "applied before, not allowed", sha: v1, applied: v2, before: true, wantRefuse: true, refuseHas: "111111111111 was applied on this box before"},
		{name: "applied before, allowed", sha: v1, applied: v2, before: true, allow: true, wantNote: true, noteHas: "rollback to 111111111111"},
	} {
		t.Run(c.name, func(t *testing.T) {
			refuse, note := planRollback(c.sha, c.applied, at, c.before, c.allow)
			if (refuse != "") != c.wantRefuse || (note != "") != c.wantNote {
				t.Fatalf("refuse %q note %q", refuse, note)
			}
			if !strings.Contains(refuse, c.refuseHas) || !strings.Contains(note, c.noteHas) {
				t.Fatalf("refuse %q note %q, want %q / %q", refuse, note, c.refuseHas, c.noteHas)
			}
		})
	}
}

func TestPlanResume(t *testing.T) {
	v1 := strings.Repeat("1", 64)
	for _, c := range []struct {
		name    string
		st      machine.State
		rec     store.Record
		ev      string
		cleared []string
	}{
		{name: "nothing parked", st: machine.Reported},
		{name: "a refusal", st: machine.Refused, rec: store.Record{Refusal: &store.Refusal{Code: "ROLLBACK_REFUSED", Sha: v1, Detail: "applied before"}},
			ev: machine.EvResume, cleared: []string{"refusal ROLLBACK_REFUSED of 111111111111 (applied before)"}},
		{name: "a block", st: machine.Blocked, rec: store.Record{Block: &store.Block{Code: "UNAUTHENTICATED", Detail: "token refused"}},
			ev: machine.EvUnblock, cleared: []string{"block UNAUTHENTICATED (token refused)"}},
		{name: "tenancy's Retry-After is not cleared", st: machine.Idle, rec: store.Record{LeaseRetryAfter: planNow.Add(time.Minute)},
			cleared: []string{"nothing about the lease budget: tenancy's Retry-After still holds until " + machine.Stamp(planNow.Add(time.Minute))}},
		{name: "a Retry-After passed", st: machine.Idle, rec: store.Record{LeaseRetryAfter: planNow.Add(-time.Minute)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ev, cleared := planResume(c.st, c.rec, planNow)
			if ev != c.ev || strings.Join(cleared, "|") != strings.Join(c.cleared, "|") {
				t.Fatalf("%q %q, want %q %q", ev, cleared, c.ev, c.cleared)
			}
		})
	}
}

// A failed ps's error goes into a one-line report detail: only its first line.
func TestFirstLine(t *testing.T) {
	for in, want := range map[string]string{"": "", "one": "one", "one\ntwo": "one", "one\r\ntwo": "one", "\ntwo": ""} {
		if got := firstLine(in); got != want {
			t.Errorf("firstLine(%q) = %q, want %q", in, got, want)
		}
	}
}
