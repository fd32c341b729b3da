package states

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/effects/files"
	"github.com/tikali/monky-deployd/internal/bundle"
	"github.com/tikali/monky-deployd/internal/failpoint"
	"github.com/tikali/monky-deployd/internal/redact"
	"github.com/tikali/monky-deployd/machine"
	"github.com/tikali/monky-deployd/store"
)

// LeaseLimit and LeaseWindow are tenancy's budget (machine.LeaseLimit per machine.LeaseWindow).
const (
	LeaseLimit  = machine.LeaseLimit
	LeaseWindow = machine.LeaseWindow
)

// stepPreflight: BundleVerified → Refused | Leased | LoggedIn | Failed. The checks that need
// this box (rollback, disk), then a token fit to read the secrets: reused when it can be,
// leased when it must be — never a lease the budget cannot afford.
func (tk *tick) stepPreflight(ctx context.Context) error {
	started := tk.Now()
	b, err := tk.currentBundle(ctx)
	if err != nil {
		var r *bundle.Refusal
		if errors.As(err, &r) {
			return tk.refuse(ctx, r.Code, r.Detail, 0)
		}
		return tk.resumeBundleError(ctx, machine.BundleVerified, err)
	}
	rec := tk.eng.Record()
	if rec.Sha != rec.AppliedSha {
		if at, ok := tk.appliedBefore(rec.Sha); ok {
			if !b.Meta.Agent.AllowRollback {
				return tk.refuse(ctx, codeRollback, fmt.Sprintf("%s was applied on this box before (%s) and is not the one applied now (%s); bundle.json agent.allow_rollback is not set",
					machine.ShortSha(rec.Sha), machine.Stamp(at), machine.ShortSha(rec.AppliedSha)), 0)
			}
			if err := tk.eng.Note(machine.NoteRollbackAllowed, "", fmt.Sprintf("rollback to %s (applied on this box before, %s; applied now %s): allowed by bundle.json agent.allow_rollback",
				machine.ShortSha(rec.Sha), machine.Stamp(at), machine.ShortSha(rec.AppliedSha)), started, nil); err != nil {
				return err
			}
		}
	}
	ok, detail, err := tk.diskEnough(ctx, b.Meta.DiskNeedBytes)
	if err != nil {
		return err
	}
	if !ok {
		return tk.refuse(ctx, codeDisk, detail, b.Meta.DiskNeedBytes)
	}
	man, err := b.Manifest()
	if err != nil {
		return tk.refuse(ctx, bundle.CodeInvalid, err.Error(), 0)
	}
	if len(man.Entries) == 0 {
		return tk.eng.Fire(machine.Outcome{Event: machine.EvReuse, Detail: "no secrets to read: no lease needed"}, started)
	}
	why, ok, err := tk.reusableToken(ctx)
	if err != nil {
		// OpenBao could not say whether the token lives: no lease on a guess; the next tick asks again
		tk.noteStop(machine.NoteLeaseDeferred, err, started, "whether the token is reusable is asked again next tick")
		return err
	}
	if ok {
		return tk.eng.Fire(machine.Outcome{Event: machine.EvReuse, Detail: why}, started)
	}
	if kept, _ := readSecretFile(tk.Cfg.GrantPath()); kept != "" && !grantExpired(kept, tk.Now()) {
		jti := grantJTI(kept)
		return tk.eng.Fire(machine.Outcome{Event: machine.EvLease, Detail: "a lease's grant kept from an interrupted tick: no new lease", Update: func(r *store.Record, _ store.Tx) error {
			r.LeaseJTI = jti
			return nil
		}}, started)
	}
	lease, err := tk.askLease(ctx, "apply")
	if local(err) || (err != nil && tk.isBlocked()) {
		return err
	}
	if err != nil {
		if effects.IsTemporary(err) {
			if tk.tokenWorks(ctx) {
				src := tk.eng.Record().Token.Source
				if src == "" {
					src = SourceBootstrap
				}
				return tk.eng.Fire(machine.Outcome{Event: machine.EvReuse, Code: effects.CodeOf(err), Detail: redact.String(err.Error()) + ": applying with the " + src + " token; the swap waits for the next apply"}, started)
			}
			tk.noteStop(machine.NoteLeaseDeferred, err, started, "")
			return err
		}
		return tk.fail(ctx, machine.BundleVerified, codeOr(err, "LEASE_FAILED"), redact.String(err.Error()), false)
	}
	if err := files.WriteAtomicFS(tk.fs(), tk.Cfg.GrantPath(), []byte(lease.LoginJWT+"\n"), 0o600); err != nil {
		return err
	}
	failpoint.Hit("file:grant-written")
	tk.grantFresh = true
	used, _ := tk.leaseBudget()
	jti := grantJTI(lease.LoginJWT)
	return tk.eng.Fire(machine.Outcome{Event: machine.EvLease, Detail: fmt.Sprintf("lease granted (%d/%d this hour); grant kept 0600 until login", used, LeaseLimit), Update: func(r *store.Record, _ store.Tx) error {
		r.LeaseJTI = jti
		return nil
	}}, started)
}

// appliedBefore reports whether sha is in the applied history since the last retire (a
// retired env starts afresh), and when it was applied.
func (tk *tick) appliedBefore(sha string) (time.Time, bool) {
	var at time.Time
	var found bool
	retired := tk.eng.Record().RetiredAt
	_ = tk.Store.View(func(tx store.Tx) error {
		h, err := tx.AppliedHistory()
		for _, x := range h {
			if x.Sha == sha && x.At.After(retired) {
				at, found = x.At, true
			}
		}
		return err
	})
	return at, found
}

// reusableToken: a lease-derived token whose ttl (after a renew where needed) stays above
// renew_below_s reads the secrets; no new lease. A bootstrap token is swapped once. A lookup
// or renew that fails for a temporary reason is returned: it proves nothing about the token,
// and a lease asked on it would spend the budget for nothing.
func (tk *tick) reusableToken(ctx context.Context) (string, bool, error) {
	rec := tk.eng.Record()
	if rec.Token.Source != SourceLease || tk.token == "" {
		return "", false, nil
	}
	below := time.Duration(tk.Cfg.Bao.RenewBelow) * time.Second
	info, err := tk.Fx.Bao.LookupSelf(ctx, tk.token)
	if err != nil {
		if effects.IsTemporary(err) {
			return "", false, err
		}
		tk.Log.Debug().Msg("lease-derived token not reusable: " + redact.String(err.Error()))
		return "", false, nil
	}
	ttl := info.TTL
	if ttl <= below {
		ttl, err = tk.Fx.Bao.RenewSelf(ctx, tk.token, 24*time.Hour)
		if err != nil && effects.IsTemporary(err) {
			return "", false, err
		}
		if err != nil || ttl <= below {
			return "", false, nil
		}
	}
	now := tk.Now()
	_ = tk.eng.Save(func(r *store.Record, _ store.Tx) error {
		r.Token.ExpiresAt, r.Token.CheckedAt = now.Add(ttl), now
		return nil
	})
	return fmt.Sprintf("reusing the lease-derived token (ttl %s): no new lease", ttl.Round(time.Second)), true, nil
}

// tokenWorks reports whether the current token still answers lookup-self.
func (tk *tick) tokenWorks(ctx context.Context) bool {
	if tk.token == "" {
		return false
	}
	info, err := tk.Fx.Bao.LookupSelf(ctx, tk.token)
	return err == nil && (info.TTL > 0 || info.ExpireTime.IsZero())
}

// leaseBudget is the leases asked in the window and when the oldest of them leaves it.
func (tk *tick) leaseBudget() (int, time.Time) {
	var used int
	var frees time.Time
	_ = tk.Store.View(func(tx store.Tx) error {
		var err error
		used, frees, err = machine.LeaseBudget(tx, tk.Now())
		return err
	})
	return used, frees
}

// budgetSpent is the answer to a lease the budget does not afford: used of LeaseLimit in the
// last hour, until frees.
func budgetSpent(used int, frees time.Time) error {
	return &effects.Error{Op: "lease", Kind: effects.RateLimited, Code: machine.CodeLeaseBudget,
		Msg: fmt.Sprintf("lease budget %d/%d until %s", used, LeaseLimit, machine.Stamp(frees))}
}

// askLease asks tenancy for a lease unless the durable budget says it would be refused.
// Every lease asked is recorded before it is asked, granted or not.
func (tk *tick) askLease(ctx context.Context, reason string) (effects.Lease, error) {
	now := tk.Now()
	rec := tk.eng.Record()
	if now.Before(rec.LeaseRetryAfter) {
		return effects.Lease{}, &effects.Error{Op: "lease", Kind: effects.RateLimited, Code: machine.CodeLeaseRateLimit,
			Msg: "tenancy asked to wait: no lease before " + machine.Stamp(rec.LeaseRetryAfter)}
	}
	if used, frees := tk.leaseBudget(); used >= LeaseLimit {
		return effects.Lease{}, budgetSpent(used, frees)
	}
	var lease effects.Lease
	asked := 0
	err := tk.withBearer(ctx, func() error {
		if asked > 0 {
			// asked again with a fresh token: only when the budget still affords it
			if used, frees := tk.leaseBudget(); used >= LeaseLimit {
				return budgetSpent(used, frees)
			}
		}
		asked++
		if err := tk.eng.Save(func(_ *store.Record, tx store.Tx) error {
			return tx.AddLease(store.LeaseEvent{At: tk.Now(), Outcome: machine.LeaseAsked})
		}); err != nil {
			return err
		}
		var err error
		lease, err = tk.Fx.Tenancy.Lease(ctx, tk.token, tk.Cfg.EnvID, reason)
		return err
	})
	if err != nil {
		var e *effects.Error
		if errors.As(err, &e) && e.Kind == effects.RateLimited {
			wait := e.RetryAfter
			if wait <= 0 {
				wait = time.Minute
			}
			if wait > LeaseWindow {
				wait = LeaseWindow
			}
			_ = tk.eng.Save(func(r *store.Record, _ store.Tx) error {
				r.LeaseRetryAfter = now.Add(wait)
				return nil
			})
			if e.Code == "" {
				// tenancy's 429 without a code of its own: the entry carries the code in its field
				cp := *e
				cp.Code = machine.CodeLeaseRateLimit
				err = &cp
			}
		}
		return lease, err
	}
	redact.Add(lease.LoginJWT)
	if err := checkCredential("lease", "the login_jwt in tenancy's lease", lease.LoginJWT); err != nil {
		return effects.Lease{}, err
	}
	if lease.Addr != "" && lease.Addr != tk.Cfg.Bao.Addr {
		tk.Log.Info().Msgf("lease names OpenBao at %s; the configured %s is used", lease.Addr, tk.Cfg.Bao.Addr)
	}
	return lease, nil
}

// grantJTI reads a JWT's jti without verifying it; "" when it has none.
func grantJTI(jwt string) string {
	var claims struct {
		JTI string `json:"jti"`
	}
	if !jwtClaims(jwt, &claims) {
		return ""
	}
	return claims.JTI
}

// jwtClaims decodes a JWT's payload into v without verifying it.
func jwtClaims(jwt string, v any) bool {
	parts := strings.Split(strings.TrimSpace(jwt), ".")
	if len(parts) != 3 {
		return false
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	return err == nil && json.Unmarshal(raw, v) == nil
}

// grantExpired reads a JWT's exp without verifying it (OpenBao verifies); true when past.
func grantExpired(jwt string, now time.Time) bool {
	parts := strings.Split(jwt, ".")
	if len(parts) != 3 {
		return false
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return false
	}
	var claims struct {
		Exp int64 `json:"exp"`
	}
	if json.Unmarshal(raw, &claims) != nil || claims.Exp == 0 {
		return false
	}
	return !now.Before(time.Unix(claims.Exp, 0))
}
