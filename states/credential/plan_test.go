package credential

import (
	"errors"
	"testing"
	"time"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/internal/vocab"
	"github.com/tikali/monky-deployd/machine"
	"github.com/tikali/monky-deployd/store"
)

var (
	temporary = &effects.Error{Op: "bao lookup-self", Kind: effects.Temporary, Msg: "connection refused"}
	refused   = &effects.Error{Op: "bao lookup-self", Kind: effects.Permanent, Status: 403, Code: vocab.BaoPermissionDenied, Msg: "permission denied"}
)

func TestPlanStart(t *testing.T) {
	const tokenPath, grantPath = "/var/lib/monky-deployd/bao.token", "/etc/monky-deployd/bootstrap.jwt"
	unreadable := errors.New("read /etc/monky-deployd/bootstrap.jwt: input/output error")
	for _, c := range []struct {
		name         string
		token, grant string
		grantErr     error
		use, boot    bool
		drop         bool
		reason       vocab.Reason // of the block, "" when none
	}{
		{name: "a stored token is used", token: "s.abc", grant: "e.y.z", use: true},
		{name: "a stored token that is not a credential is dropped", token: "s.a\x07b", drop: true},
		{name: "no token, a grant: bootstrap", grant: "e.y.z", boot: true},
		{name: "no token, an unreadable grant", grantErr: unreadable, reason: vocab.ReasonGrantUnreadable},
		{name: "no token, no grant", reason: vocab.ReasonGrantAbsent},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := PlanStart(c.token, c.grant, c.grantErr, tokenPath, grantPath)
			if p.Use != c.use || p.Bootstrap != c.boot || (p.Drop != nil) != c.drop {
				t.Fatalf("plan %+v", p)
			}
			if c.drop && effects.CodeOf(p.Drop) != vocab.CredentialShape {
				t.Errorf("dropped with %s, want %s", effects.CodeOf(p.Drop), vocab.CredentialShape)
			}
			if (p.Block != nil) != (c.reason != "") {
				t.Fatalf("block %+v, want reason %q", p.Block, c.reason)
			}
			if p.Block != nil && (p.Block.Reason != c.reason || p.Block.Cause != c.grantErr) {
				t.Errorf("block %+v, want reason %s and the read's error as its cause", p.Block, c.reason)
			}
		})
	}
}

func TestGrantLoginFailed(t *testing.T) {
	if b := GrantLoginFailed(temporary); b != nil {
		t.Errorf("a temporary failure blocks: %+v", b)
	}
	b := GrantLoginFailed(refused)
	if b == nil || b.Reason != vocab.ReasonGrantRefused || b.Cause != refused {
		t.Errorf("a refused grant: %+v", b)
	}
}

func TestUpkeep(t *testing.T) {
	known := store.TokenMeta{Present: true, ExpiresAt: planNow.Add(time.Hour)}
	for _, c := range []struct {
		name      string
		meta      store.TokenMeta
		recovered bool
		want      bool
	}{
		{"known", known, false, false},
		{"no expiry", store.TokenMeta{Present: true}, false, true},
		{"not recorded", store.TokenMeta{ExpiresAt: known.ExpiresAt}, false, true},
		{"recovered from a copy", known, true, true},
	} {
		if got := Unknown(c.meta, c.recovered); got != c.want {
			t.Errorf("%s: unknown %v, want %v", c.name, got, c.want)
		}
	}
	below := 10 * time.Minute
	if RenewDue(planNow.Add(below), planNow, below) || !RenewDue(planNow.Add(below-time.Second), planNow, below) {
		t.Error("renew_below_s is the edge: a ttl of exactly it is not renewed, a second less is")
	}
	if SwapDue(below, below) || !SwapDue(below-time.Second, below) {
		t.Error("a renew that leaves less than renew_below_s swaps")
	}
}

func TestBearerOf(t *testing.T) {
	for _, c := range []struct {
		err  error
		want Bearer
	}{
		{nil, BearerKept},
		{temporary, BearerKept},
		{refused, BearerKept}, // OpenBao's 403 is not tenancy's 401
		{&effects.Error{Op: "checkin", Kind: effects.Unauthenticated, Status: 401}, BearerRefused},
		{&effects.Error{Op: "checkin", Kind: effects.EnvMismatch, Status: 403, Code: vocab.AgentEnvMismatch}, BearerEnvMismatch},
	} {
		if got := BearerOf(c.err); got != c.want {
			t.Errorf("%v: %d, want %d", c.err, got, c.want)
		}
	}
	if b := RefusedAgain(refused); b.Reason != vocab.ReasonTenancy401 || b.Cause != refused {
		t.Errorf("refused again: %+v", b)
	}
}

func TestPlanReuse(t *testing.T) {
	below := 10 * time.Minute
	for _, c := range []struct {
		name    string
		ttl     time.Duration
		err     error
		renewed time.Duration
		rerr    error
		want    Reuse
	}{
		{name: "alive", ttl: time.Hour, want: ReuseYes},
		{name: "OpenBao down: ask next tick", err: temporary, want: ReuseAsk},
		{name: "refused: a lease", err: refused, want: ReuseNo},
		{name: "low, renewed", ttl: below, renewed: time.Hour, want: ReuseYes},
		{name: "low, renewed but still low", ttl: below, renewed: below, want: ReuseNo},
		{name: "low, the renew refused", ttl: time.Minute, rerr: refused, want: ReuseNo},
		{name: "low, OpenBao down at the renew", ttl: time.Minute, rerr: temporary, want: ReuseAsk},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := PlanReuse(c.ttl, c.err, below)
			if got == ReuseRenew {
				got = PlanRenewed(c.renewed, c.rerr, below)
			}
			if got != c.want {
				t.Fatalf("%d, want %d", got, c.want)
			}
		})
	}
}

func TestLeaseGate(t *testing.T) {
	frees := planNow.Add(20 * time.Minute)
	if err := LeaseGate(planNow, planNow.Add(-time.Second), machine.LeaseLimit-1, frees); err != nil {
		t.Errorf("a lease the budget affords: %v", err)
	}
	wait := LeaseGate(planNow, planNow.Add(time.Minute), 0, frees)
	if effects.CodeOf(wait) != vocab.LeaseRateLimited || effects.ReasonOf(wait) != vocab.ReasonAgentWait || effects.KindOf(wait) != effects.RateLimited {
		t.Errorf("tenancy asked to wait: %v", wait)
	}
	spent := LeaseGate(planNow, time.Time{}, machine.LeaseLimit, frees)
	if effects.CodeOf(spent) != vocab.LeaseBudget || effects.KindOf(spent) != effects.RateLimited {
		t.Errorf("the budget spent: %v", spent)
	}
}

func TestThrottled(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		wait time.Duration
		code vocab.Code
	}{
		{"not a rate limit", refused, 0, vocab.BaoPermissionDenied},
		{"a 429 without Retry-After", &effects.Error{Op: "lease", Kind: effects.RateLimited, Status: 429}, time.Minute, vocab.LeaseRateLimited},
		{"a 429 with its own code", &effects.Error{Op: "lease", Kind: effects.RateLimited, Status: 429, Code: vocab.LeaseBudget, RetryAfter: 5 * time.Minute}, 5 * time.Minute, vocab.LeaseBudget},
		{"a Retry-After past the window", &effects.Error{Op: "lease", Kind: effects.RateLimited, Status: 429, Code: vocab.RateLimited, RetryAfter: 3 * time.Hour}, machine.LeaseWindow, vocab.LeaseRateLimited},
	} {
		t.Run(c.name, func(t *testing.T) {
			wait, out := Throttled(c.err)
			if wait != c.wait || effects.CodeOf(out) != c.code {
				t.Fatalf("wait %s code %s, want %s %s", wait, effects.CodeOf(out), c.wait, c.code)
			}
		})
	}
}
