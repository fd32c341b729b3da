package credential

import (
	"errors"
	"fmt"
	"time"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/internal/vocab"
	"github.com/tikali/monky-deployd/machine"
	"github.com/tikali/monky-deployd/store"
)

// Blocked is a plan's answer that the box cannot get a bearer by itself: the machine blocks
// under the reason, with these words, until a person acts (a fresh grant on disk, resume).
type Blocked struct {
	Reason vocab.Reason
	Detail string
	Cause  error // the error that showed it, nil when nothing was asked
}

// Start is how a tick gets its bearer from what is on disk: use the stored token, drop it
// (Drop, the cause: it is not a credential), log in with the kit's grant, or block.
type Start struct {
	Use, Bootstrap bool
	Drop           error
	Block          *Blocked
}

// PlanStart decides from the stored token ("" when none), the bootstrap grant ("" when none)
// and the error reading the grant, at the paths the words name.
func PlanStart(token, grant string, grantErr error, tokenPath, grantPath string) Start {
	switch {
	case token != "":
		if err := Check("token", tokenPath, vocab.ReasonShape, token); err != nil {
			// written by an older agent: unusable in a header, so dropped like a refused one
			return Start{Drop: err}
		}
		return Start{Use: true}
	case grantErr != nil:
		return Start{Block: &Blocked{Reason: vocab.ReasonGrantUnreadable, Cause: grantErr,
			Detail: fmt.Sprintf("no token and the bootstrap grant at %s is unreadable: %v", grantPath, grantErr)}}
	case grant == "":
		return Start{Block: &Blocked{Reason: vocab.ReasonGrantAbsent,
			Detail: fmt.Sprintf("no token at %s and no bootstrap grant at %s — re-run the install kit", tokenPath, grantPath)}}
	}
	return Start{Bootstrap: true}
}

// GrantLoginFailed decides on OpenBao's answer to a login with the kit's grant: nil when the
// failure is temporary (the grant is kept; the next tick tries again), else the block.
func GrantLoginFailed(err error) *Blocked {
	if effects.IsTemporary(err) {
		return nil
	}
	return &Blocked{Reason: vocab.ReasonGrantRefused, Cause: err,
		Detail: "the bootstrap grant was refused by OpenBao (" + err.Error() + ") — re-run the install kit for a fresh grant"}
}

// Unknown reports whether the token's expiry must be learnt from OpenBao (lookup-self) before
// use: the record does not know it, or the token was recovered from a copy.
func Unknown(t store.TokenMeta, recovered bool) bool {
	return t.ExpiresAt.IsZero() || !t.Present || recovered
}

// RenewDue reports whether a token expiring at expires is renewed at now: its ttl is under below.
func RenewDue(expires, now time.Time, below time.Duration) bool {
	return expires.Sub(now) < below
}

// SwapDue reports whether a renew that gave ttl left the token near its max ttl: only a new
// lease gives a new one.
func SwapDue(ttl, below time.Duration) bool {
	return ttl < below
}

// Bearer is what a call that carried the token answered, as the credential sees it.
type Bearer int

const (
	BearerKept        Bearer = iota // the token was not refused (the call's own error, if any, stands)
	BearerRefused                   // tenancy's 401: drop the token, log in again where a grant is on disk
	BearerEnvMismatch               // tenancy's 403 AGENT_ENV_MISMATCH: block until the config changes
)

// BearerOf classifies a call's error by its kind.
func BearerOf(err error) Bearer {
	switch effects.KindOf(err) {
	case effects.Unauthenticated:
		return BearerRefused
	case effects.EnvMismatch:
		return BearerEnvMismatch
	}
	return BearerKept
}

// RefusedAgain is the block when the token of a fresh grant was refused by tenancy too.
func RefusedAgain(err error) *Blocked {
	return &Blocked{Reason: vocab.ReasonTenancy401, Cause: err, Detail: "the fresh bootstrap grant's token was refused too"}
}

// Reuse is what a lease-derived token's lookup-self (and renew-self, when it ran) say of it.
type Reuse int

const (
	ReuseNo    Reuse = iota // not reusable: a lease is asked
	ReuseRenew              // alive but low: renew it, then decide on the renew's answer
	ReuseYes                // reusable: no lease
	ReuseAsk                // OpenBao could not answer: ask again next tick, no lease on a guess
)

// PlanReuse decides on a lease-derived token from lookup-self's ttl or error, below being
// renew_below_s.
func PlanReuse(ttl time.Duration, err error, below time.Duration) Reuse {
	switch {
	case err != nil && effects.IsTemporary(err):
		return ReuseAsk
	case err != nil:
		return ReuseNo
	case ttl <= below:
		return ReuseRenew
	}
	return ReuseYes
}

// PlanRenewed decides on renew-self's answer for a token PlanReuse sent to renew.
func PlanRenewed(ttl time.Duration, err error, below time.Duration) Reuse {
	switch {
	case err != nil && effects.IsTemporary(err):
		return ReuseAsk
	case err != nil || ttl <= below:
		return ReuseNo
	}
	return ReuseYes
}

// ReuseWords is the journal's words for a reused token of ttl.
func ReuseWords(ttl time.Duration) string {
	return fmt.Sprintf("reusing the lease-derived token (ttl %s): no new lease", ttl.Round(time.Second))
}

// LeaseGate is the answer to a lease asked at now before it is asked: tenancy asked to wait
// until retryAfter, or the budget (used leases this window, the oldest leaving it at frees) is
// spent; nil when the lease may be asked.
func LeaseGate(now, retryAfter time.Time, used int, frees time.Time) error {
	if now.Before(retryAfter) {
		return &effects.Error{Op: "lease", Kind: effects.RateLimited, Code: vocab.LeaseRateLimited, Reason: vocab.ReasonAgentWait,
			Msg: "tenancy asked to wait: no lease before " + machine.Stamp(retryAfter)}
	}
	return BudgetGate(used, frees)
}

// BudgetGate is the answer to a lease the budget does not afford (used of machine.LeaseLimit
// in the window, until frees); nil when it affords one.
func BudgetGate(used int, frees time.Time) error {
	if used < machine.LeaseLimit {
		return nil
	}
	return &effects.Error{Op: "lease", Kind: effects.RateLimited, Code: vocab.LeaseBudget,
		Msg: fmt.Sprintf("lease budget %d/%d until %s", used, machine.LeaseLimit, machine.Stamp(frees))}
}

// Throttled keeps tenancy's rate limit on a lease refused with err: wait is how long no lease
// is asked (its Retry-After, a minute when it gave none, at most the budget's window; 0 when
// err is not a rate limit), and out is err with the lease's code when tenancy's 429 had none
// of its own.
func Throttled(err error) (wait time.Duration, out error) {
	var e *effects.Error
	if !errors.As(err, &e) || e.Kind != effects.RateLimited {
		return 0, err
	}
	wait = e.RetryAfter
	if wait <= 0 {
		wait = time.Minute
	}
	if wait > machine.LeaseWindow {
		wait = machine.LeaseWindow
	}
	if e.Code == "" || e.Code == vocab.RateLimited {
		cp := *e
		cp.Code = vocab.LeaseRateLimited
		return wait, &cp
	}
	return wait, err
}

// LeaseWords is the journal's words for a lease granted with used of the budget spent.
func LeaseWords(used int) string {
	return fmt.Sprintf("lease granted (%d/%d this hour); grant kept 0600 until login", used, machine.LeaseLimit)
}
