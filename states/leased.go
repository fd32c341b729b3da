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
func (a *Agent) stepPreflight(ctx context.Context) error {
	started := a.Now()
	b, err := a.currentBundle(ctx)
	if err != nil {
		var r *bundle.Refusal
		if errors.As(err, &r) {
			return a.refuse(ctx, r.Code, r.Detail, 0)
		}
		return a.resumeBundleError(ctx, machine.BundleVerified, err)
	}
	rec := a.eng.Record()
	if rec.Sha != rec.AppliedSha {
		if at, ok := a.appliedBefore(rec.Sha); ok {
			if !b.Meta.Agent.AllowRollback {
				return a.refuse(ctx, codeRollback, fmt.Sprintf("%s was applied on this box before (%s) and is not the one applied now (%s); bundle.json agent.allow_rollback is not set",
					short(rec.Sha), stamp(at), short(rec.AppliedSha)), 0)
			}
			if err := a.eng.Note(machine.NoteRollbackAllowed, "", fmt.Sprintf("rollback to %s (applied on this box before, %s; applied now %s): allowed by bundle.json agent.allow_rollback",
				short(rec.Sha), stamp(at), short(rec.AppliedSha)), started, nil); err != nil {
				return err
			}
		}
	}
	ok, detail, err := a.diskEnough(ctx, b.Meta.DiskNeedBytes)
	if err != nil {
		return err
	}
	if !ok {
		return a.refuse(ctx, codeDisk, detail, b.Meta.DiskNeedBytes)
	}
	man, err := b.Manifest()
	if err != nil {
		return a.refuse(ctx, bundle.CodeInvalid, err.Error(), 0)
	}
	if len(man.Entries) == 0 {
		return a.eng.Fire(machine.Outcome{Event: machine.EvReuse, Detail: "no secrets to read: no lease needed"}, started)
	}
	why, ok, err := a.reusableToken(ctx)
	if err != nil {
		// OpenBao could not say whether the token lives: no lease on a guess; the next tick asks again
		_ = a.eng.Note("lease-deferred", effects.CodeOf(err), redact.String(err.Error())+" (whether the token is reusable is asked again next tick)", started, nil)
		return err
	}
	if ok {
		return a.eng.Fire(machine.Outcome{Event: machine.EvReuse, Detail: why}, started)
	}
	if kept, _ := readSecretFile(a.Cfg.GrantPath()); kept != "" && !grantExpired(kept, a.Now()) {
		jti := grantJTI(kept)
		return a.eng.Fire(machine.Outcome{Event: machine.EvLease, Detail: "a lease's grant kept from an interrupted tick: no new lease", Update: func(r *store.Record, _ store.Tx) error {
			r.LeaseJTI = jti
			return nil
		}}, started)
	}
	lease, err := a.askLease(ctx, "apply")
	if local(err) || (err != nil && a.isBlocked()) {
		return err
	}
	if err != nil {
		if effects.IsTemporary(err) {
			if a.tokenWorks(ctx) {
				src := a.eng.Record().Token.Source
				if src == "" {
					src = SourceBootstrap
				}
				return a.eng.Fire(machine.Outcome{Event: machine.EvReuse, Detail: redact.String(err.Error()) + ": applying with the " + src + " token; the swap waits for the next apply"}, started)
			}
			_ = a.eng.Note(machine.NoteLeaseDeferred, effects.CodeOf(err), redact.String(err.Error()), started, nil)
			return err
		}
		return a.fail(ctx, machine.BundleVerified, codeOr(err, "LEASE_FAILED"), redact.String(err.Error()), false)
	}
	if err := files.WriteAtomicFS(a.fs(), a.Cfg.GrantPath(), []byte(lease.LoginJWT+"\n"), 0o600); err != nil {
		return err
	}
	failpoint.Hit("file:grant-written")
	a.grantFresh = true
	used, _ := a.leaseBudget()
	jti := grantJTI(lease.LoginJWT)
	return a.eng.Fire(machine.Outcome{Event: machine.EvLease, Detail: fmt.Sprintf("lease granted (%d/%d this hour); grant kept 0600 until login", used, LeaseLimit), Update: func(r *store.Record, _ store.Tx) error {
		r.LeaseJTI = jti
		return nil
	}}, started)
}

// appliedBefore reports whether sha is in the applied history since the last retire (a
// retired env starts afresh), and when it was applied.
func (a *Agent) appliedBefore(sha string) (time.Time, bool) {
	var at time.Time
	var found bool
	retired := a.eng.Record().RetiredAt
	_ = a.Store.View(func(tx store.Tx) error {
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
func (a *Agent) reusableToken(ctx context.Context) (string, bool, error) {
	rec := a.eng.Record()
	if rec.Token.Source != SourceLease || a.token == "" {
		return "", false, nil
	}
	below := time.Duration(a.Cfg.Bao.RenewBelow) * time.Second
	info, err := a.Fx.Bao.LookupSelf(ctx, a.token)
	if err != nil {
		if effects.IsTemporary(err) {
			return "", false, err
		}
		a.Log.Debug().Msg("lease-derived token not reusable: " + redact.String(err.Error()))
		return "", false, nil
	}
	ttl := info.TTL
	if ttl <= below {
		ttl, err = a.Fx.Bao.RenewSelf(ctx, a.token, 24*time.Hour)
		if err != nil && effects.IsTemporary(err) {
			return "", false, err
		}
		if err != nil || ttl <= below {
			return "", false, nil
		}
	}
	now := a.Now()
	_ = a.eng.Save(func(r *store.Record, _ store.Tx) error {
		r.Token.ExpiresAt, r.Token.CheckedAt = now.Add(ttl), now
		return nil
	})
	return fmt.Sprintf("reusing the lease-derived token (ttl %s): no new lease", ttl.Round(time.Minute)), true, nil
}

// tokenWorks reports whether the current token still answers lookup-self.
func (a *Agent) tokenWorks(ctx context.Context) bool {
	if a.token == "" {
		return false
	}
	info, err := a.Fx.Bao.LookupSelf(ctx, a.token)
	return err == nil && (info.TTL > 0 || info.ExpireTime.IsZero())
}

// leaseBudget is the leases asked in the window and when the oldest of them leaves it.
func (a *Agent) leaseBudget() (int, time.Time) {
	var used int
	var frees time.Time
	_ = a.Store.View(func(tx store.Tx) error {
		var err error
		used, frees, err = machine.LeaseBudget(tx, a.Now())
		return err
	})
	return used, frees
}

// askLease asks tenancy for a lease unless the durable budget says it would be refused.
// Every lease asked is recorded before it is asked, granted or not.
func (a *Agent) askLease(ctx context.Context, reason string) (effects.Lease, error) {
	now := a.Now()
	rec := a.eng.Record()
	if now.Before(rec.LeaseRetryAfter) {
		return effects.Lease{}, &effects.Error{Op: "lease", Kind: effects.RateLimited, Code: "LEASE_RATE_LIMITED",
			Msg: "tenancy asked to wait: no lease before " + stamp(rec.LeaseRetryAfter)}
	}
	if used, frees := a.leaseBudget(); used >= LeaseLimit {
		return effects.Lease{}, &effects.Error{Op: "lease", Kind: effects.RateLimited, Code: "LEASE_BUDGET",
			Msg: fmt.Sprintf("lease budget %d/%d until %s", used, LeaseLimit, stamp(frees))}
	}
	var lease effects.Lease
	asked := 0
	err := a.withBearer(ctx, func() error {
		if asked > 0 {
			// asked again with a fresh token: only when the budget still affords it
			if used, frees := a.leaseBudget(); used >= LeaseLimit {
				return &effects.Error{Op: "lease", Kind: effects.RateLimited, Code: "LEASE_BUDGET",
					Msg: fmt.Sprintf("lease budget %d/%d until %s", used, LeaseLimit, stamp(frees))}
			}
		}
		asked++
		if err := a.eng.Save(func(_ *store.Record, tx store.Tx) error {
			return tx.AddLease(store.LeaseEvent{At: a.Now(), Outcome: machine.LeaseAsked})
		}); err != nil {
			return err
		}
		var err error
		lease, err = a.Fx.Tenancy.Lease(ctx, a.token, a.Cfg.EnvID, reason)
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
			_ = a.eng.Save(func(r *store.Record, _ store.Tx) error {
				r.LeaseRetryAfter = now.Add(wait)
				return nil
			})
		}
		return lease, err
	}
	redact.Add(lease.LoginJWT)
	if err := checkCredential("lease", "the login_jwt in tenancy's lease", lease.LoginJWT); err != nil {
		return effects.Lease{}, err
	}
	if lease.Addr != "" && lease.Addr != a.Cfg.Bao.Addr {
		a.Log.Info().Msgf("lease names OpenBao at %s; the configured %s is used", lease.Addr, a.Cfg.Bao.Addr)
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

// stepLogin: Leased → LoggedIn | Failed. Log in with the kept grant, store the token, delete
// the grant.
//
// Idempotent across a crash, and decided by identity, never by timing: a tick that resumes in
// Leased asks OpenBao who the stored token is (lookup-self); when its grant_jti is the kept
// grant's jti (or, the grant already removed, the jti recorded with the lease), the login
// happened before the kill and is not repeated. A lookup that fails for a temporary reason
// ends the tick: the next one asks again rather than risk a second login.
func (a *Agent) stepLogin(ctx context.Context) error {
	started := a.Now()
	rec := a.eng.Record()
	grant, err := readSecretFile(a.Cfg.GrantPath())
	if err != nil {
		return err
	}
	if !a.grantFresh && a.token != "" {
		jti := rec.LeaseJTI
		if grant != "" {
			jti = grantJTI(grant)
		}
		info, err := a.Fx.Bao.LookupSelf(ctx, a.token)
		switch {
		case err != nil && effects.IsTemporary(err):
			_ = a.eng.Note("login-deferred", effects.CodeOf(err), redact.String(err.Error())+" (whether the kept grant was used is asked again next tick)", started, nil)
			return err
		case err == nil && jti != "" && info.GrantJTI == jti:
			consumed := "grant consumed (deleted)"
			if err := files.RemoveFS(a.fs(), a.Cfg.GrantPath()); err != nil {
				consumed = "the kept grant could NOT be deleted (" + redact.String(err.Error()) + ")"
			}
			return a.loggedIn(started, info.TTL, info.GrantJTI, info.EnvID, "logged in before a restart; "+consumed)
		case err == nil && jti == "" && grant == "" && info.GrantJTI != "" && info.GrantJTI != rec.Token.GrantJTI:
			// a state file from before lease_jti was recorded
			return a.loggedIn(started, info.TTL, info.GrantJTI, info.EnvID, "logged in before a restart")
		}
	}
	if grant == "" || grantExpired(grant, a.Now()) {
		_ = files.RemoveFS(a.fs(), a.Cfg.GrantPath())
		lease, err := a.askLease(ctx, "apply")
		if err != nil {
			if effects.IsTemporary(err) || local(err) || a.isBlocked() {
				return err
			}
			return a.fail(ctx, machine.Leased, codeOr(err, "LEASE_FAILED"), redact.String(err.Error()), false)
		}
		grant = lease.LoginJWT
		if err := files.WriteAtomicFS(a.fs(), a.Cfg.GrantPath(), []byte(grant+"\n"), 0o600); err != nil {
			return err
		}
		failpoint.Hit("file:grant-written")
		jti := grantJTI(grant)
		if err := a.eng.Save(func(r *store.Record, _ store.Tx) error { r.LeaseJTI = jti; return nil }); err != nil {
			return err
		}
		a.Log.Debug().Msg("the kept grant was gone or expired: leased again")
	}
	t, err := a.Fx.Bao.Login(ctx, a.Cfg.Bao.AuthMount, a.Cfg.Bao.Role, grant)
	if err != nil {
		if effects.IsTemporary(err) {
			_ = a.eng.Note(machine.NoteLoginFailed, effects.CodeOf(err), redact.String(err.Error())+" (grant kept for the next tick)", started, nil)
			return err
		}
		return a.fail(ctx, machine.Leased, codeOr(err, "BAO_LOGIN_REFUSED"), redact.String(err.Error()), false)
	}
	redact.Add(t.Value)
	if err := checkCredential("bao login", "the token in OpenBao's answer", t.Value); err != nil {
		return a.fail(ctx, machine.Leased, effects.CodeOf(err), err.Error(), false)
	}
	old := a.token
	if err := files.WriteAtomicFS(a.fs(), a.Cfg.TokenPath(), []byte(t.Value+"\n"), 0o600); err != nil {
		return err
	}
	failpoint.Hit("file:token-written")
	a.token = t.Value
	if err := files.RemoveFS(a.fs(), a.Cfg.GrantPath()); err != nil {
		return err
	}
	failpoint.Hit("file:grant-removed")
	if err := a.loggedIn(started, t.TTL, t.Meta["grant_jti"], t.Meta["env_id"], fmt.Sprintf("logged in with the lease's grant (ttl %s); token replaced", t.TTL.Round(time.Minute))); err != nil {
		return err
	}
	if old != "" && old != t.Value {
		if err := a.Fx.Bao.RevokeSelf(ctx, old); err != nil {
			a.Log.Info().Msg("revoking the replaced token: " + redact.String(err.Error()))
		}
	}
	return nil
}

func (a *Agent) loggedIn(started time.Time, ttl time.Duration, jti, env, detail string) error {
	now := a.Now()
	return a.eng.Fire(machine.Outcome{Event: machine.EvLogin, Detail: detail, Update: func(r *store.Record, _ store.Tx) error {
		r.Token = store.TokenMeta{Present: true, Source: SourceLease, ExpiresAt: now.Add(ttl), CheckedAt: now, GrantJTI: jti, EnvID: env}
		r.LeaseJTI = ""
		return nil
	}}, started)
}

// leaseLogin swaps the token outside an apply (upkeep near the max ttl): lease, log in,
// replace the token. Journaled as notes; the machine's state does not change.
func (a *Agent) leaseLogin(ctx context.Context, reason string) error {
	started := a.Now()
	lease, err := a.askLease(ctx, reason)
	if err != nil && a.isBlocked() {
		return err
	}
	if err != nil {
		_ = a.eng.Note(machine.NoteLeaseDeferred, effects.CodeOf(err), redact.String(err.Error()), started, nil)
		return err
	}
	t, err := a.Fx.Bao.Login(ctx, a.Cfg.Bao.AuthMount, a.Cfg.Bao.Role, lease.LoginJWT)
	if err != nil {
		return err
	}
	redact.Add(t.Value)
	if err := checkCredential("bao login", "the token in OpenBao's answer", t.Value); err != nil {
		return err
	}
	if err := files.WriteAtomicFS(a.fs(), a.Cfg.TokenPath(), []byte(t.Value+"\n"), 0o600); err != nil {
		return err
	}
	failpoint.Hit("file:swap-token-written")
	old := a.token
	a.token = t.Value
	now := a.Now()
	if err := a.eng.Note(machine.NoteTokenSwap, "", fmt.Sprintf("token near its max ttl: leased (%s) and logged in again", reason), started, func(r *store.Record, _ store.Tx) error {
		r.Token = store.TokenMeta{Present: true, Source: SourceLease, ExpiresAt: now.Add(t.TTL), CheckedAt: now, GrantJTI: t.Meta["grant_jti"], EnvID: t.Meta["env_id"]}
		return nil
	}); err != nil {
		return err
	}
	_ = a.Fx.Bao.RevokeSelf(ctx, old)
	return nil
}
