package states

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"time"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/effects/files"
	"github.com/tikali/monky-deployd/internal/failpoint"
	"github.com/tikali/monky-deployd/internal/redact"
	"github.com/tikali/monky-deployd/internal/vocab"
	"github.com/tikali/monky-deployd/machine"
	"github.com/tikali/monky-deployd/states/credential"
	"github.com/tikali/monky-deployd/store"
)

// Protocol codes the tick itself decides on.
const (
	codeEnvMismatch     = vocab.AgentEnvMismatch
	codeUnauthenticated = vocab.AgentUnauthenticated
)

// untrusted reports whether err is a file the agent refuses to trust: the tick ends with exit 1
// naming the fix, and nothing is blocked (fixing the file is enough).
func untrusted(err error) bool {
	var te *files.TrustError
	return errors.As(err, &te)
}

// readSecretFile reads a 0600 file holding one secret; "" when absent or empty. The file must
// be one the agent trusts (files.ReadTrusted): a symlink, a foreign owner or a group- or
// world-writable mode is an error naming the fix, and nothing is read from it. The value is
// registered with the redactor before it is returned.
func readSecretFile(path string) (string, error) {
	b, err := files.ReadTrusted(path, credential.MaxBytes+64)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", nil
		}
		if untrusted(err) {
			return "", err
		}
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	v := string(bytes.TrimSpace(b))
	redact.Add(v)
	return v, nil
}

// ensureToken gives the tick a bearer: the stored token (renewed when its ttl runs low), or a
// login with the kit's bootstrap grant when there is none. A fresh bootstrap.jwt beside a
// working token is left alone: the token is used.
func (tk *tick) ensureToken(ctx context.Context) error {
	tok, err := readSecretFile(tk.Cfg.TokenPath())
	if err != nil {
		return err
	}
	if tok != "" {
		if err := credential.Check("token", tk.Cfg.TokenPath(), tok); err != nil {
			// written by an older agent: unusable in a header, so dropped like a refused one
			return tk.reauthenticate(ctx, err)
		}
		tk.token = tok
		return tk.upkeep(ctx)
	}
	grant, err := readSecretFile(tk.Cfg.BootstrapPath)
	if untrusted(err) {
		return err
	}
	if err != nil {
		return tk.blockUnauthenticated(err, vocab.ReasonGrantUnreadable, fmt.Sprintf("no token and the bootstrap grant at %s is unreadable: %v", tk.Cfg.BootstrapPath, err))
	}
	if grant == "" {
		return tk.blockUnauthenticated(nil, vocab.ReasonGrantAbsent, fmt.Sprintf("no token at %s and no bootstrap grant at %s — re-run the install kit", tk.Cfg.TokenPath(), tk.Cfg.BootstrapPath))
	}
	return tk.bootstrap(ctx, grant)
}

// bootstrap logs in with the kit's bootstrap grant, stores the token (0600) and consumes the
// grant: deleted, or truncated when its directory is read-only.
func (tk *tick) bootstrap(ctx context.Context, grant string) error {
	started := tk.Now()
	redact.Add(grant)
	t, err := tk.Fx.Bao.Login(ctx, tk.Cfg.Bao.AuthMount, tk.Cfg.Bao.Role, grant)
	if err != nil {
		if effects.IsTemporary(err) {
			tk.noteStop(machine.NoteBootstrapFailed, err, started, "")
			return err
		}
		return tk.blockUnauthenticated(err, vocab.ReasonGrantRefused, "the bootstrap grant was refused by OpenBao ("+err.Error()+") — re-run the install kit for a fresh grant")
	}
	redact.Add(t.Value)
	if err := credential.Check("bao login", "the token in OpenBao's answer", t.Value); err != nil {
		_ = tk.eng.Note(machine.NoteBootstrapFailed, effects.CodeOf(err), err.Error()+"; the grant is kept for the next tick", started, nil)
		return err
	}
	if err := files.WriteAtomicFS(tk.fs(), tk.Cfg.TokenPath(), []byte(t.Value+"\n"), 0o600); err != nil {
		return err
	}
	failpoint.Hit("file:bootstrap-token-written")
	consumed := consumeGrant(tk.fs(), tk.Cfg.BootstrapPath)
	failpoint.Hit("file:bootstrap-grant-consumed")
	tk.token = t.Value
	now := tk.Now()
	meta := store.TokenMeta{Present: true, Source: store.SourceBootstrap, ExpiresAt: now.Add(t.TTL), CheckedAt: now, GrantJTI: t.Meta["grant_jti"], EnvID: t.Meta["env_id"]}
	return tk.eng.Note(machine.NoteBootstrap, "", fmt.Sprintf("logged in with the bootstrap grant; token stored (ttl %s); %s", t.TTL.Round(time.Second), consumed), started,
		func(r *store.Record, _ store.Tx) error { r.Token = meta; return nil })
}

// consumeGrant deletes a used grant, or empties it where the directory is not writable, and
// says which — or that neither worked.
func consumeGrant(fsys files.FS, path string) string {
	err := files.RemoveFS(fsys, path)
	if err == nil {
		return "grant consumed (deleted)"
	}
	if terr := os.Truncate(path, 0); terr == nil {
		return "grant consumed (emptied: its directory is not writable)"
	}
	return "the grant could NOT be consumed (" + err.Error() + "): it stays at " + path
}

// expiryUnknown: the token's expiry must be learnt from OpenBao (lookup-self) before use.
func (tk *tick) expiryUnknown(rec store.Record) bool {
	return rec.Token.ExpiresAt.IsZero() || !rec.Token.Present || tk.tokenRecovered
}

// learnExpiry asks OpenBao who the token is (lookup-self) when the state file does not know
// its expiry, and records what it says.
func (tk *tick) learnExpiry(ctx context.Context, now time.Time) error {
	info, err := tk.Fx.Bao.LookupSelf(ctx, tk.token)
	if err != nil {
		return tk.tokenUnusable(ctx, err)
	}
	// A kill between the bootstrap login's token write and the grant's consumption leaves
	// the grant on disk: the token's grant_jti says it was used.
	fromGrant := false
	if g, _ := readSecretFile(tk.Cfg.BootstrapPath); g != "" && info.GrantJTI != "" && credential.GrantJTI(g) == info.GrantJTI {
		consumeGrant(tk.fs(), tk.Cfg.BootstrapPath)
		fromGrant = true
	}
	return tk.eng.Save(func(r *store.Record, _ store.Tx) error {
		r.Token.Present = true
		if r.Token.Source == "" || fromGrant {
			r.Token.Source = store.SourceBootstrap
		}
		r.Token.ExpiresAt = now.Add(info.TTL)
		r.Token.CheckedAt = now
		r.Token.EnvID, r.Token.GrantJTI = info.EnvID, info.GrantJTI
		return nil
	})
}

// upkeep renews the token when its ttl falls under renew_below_s, learning the expiry with
// lookup-self when it is not known. A token OpenBao no longer honours is dropped.
func (tk *tick) upkeep(ctx context.Context) error {
	rec := tk.eng.Record()
	now := tk.Now()
	below := time.Duration(tk.Cfg.Bao.RenewBelow) * time.Second
	if tk.expiryUnknown(rec) {
		if err := tk.learnExpiry(ctx, now); err != nil {
			return err
		}
		rec = tk.eng.Record()
	}
	if rec.Token.ExpiresAt.Sub(now) >= below {
		return nil
	}
	started := now
	ttl, err := tk.Fx.Bao.RenewSelf(ctx, tk.token, 24*time.Hour)
	if err != nil {
		return tk.tokenUnusable(ctx, err)
	}
	if err := tk.eng.Note(machine.NoteRenew, "", fmt.Sprintf("token renewed: ttl %s", ttl.Round(time.Second)), started, func(r *store.Record, _ store.Tx) error {
		r.Token.ExpiresAt = tk.Now().Add(ttl)
		r.Token.CheckedAt = tk.Now()
		return nil
	}); err != nil {
		return err
	}
	if ttl >= below {
		return nil
	}
	// The token is near its max ttl: only a new lease gives a new one. Without budget, the
	// next tick tries again; the token still works until it expires.
	if err := tk.leaseLogin(ctx, "renew"); err != nil && !effects.IsTemporary(err) {
		return err
	}
	return nil
}

// tokenUnusable handles a lookup or renew error: temporary errors pass through; a token
// OpenBao refuses is dropped like a refused bearer.
func (tk *tick) tokenUnusable(ctx context.Context, err error) error {
	if effects.IsTemporary(err) {
		return err
	}
	return tk.reauthenticate(ctx, err)
}

// reauthenticate drops a refused token; a fresh bootstrap grant on disk logs in again in the
// same tick, else the machine blocks until one arrives.
func (tk *tick) reauthenticate(ctx context.Context, cause error) error {
	started := tk.Now()
	if err := files.RemoveFS(tk.fs(), tk.Cfg.TokenPath()); err != nil {
		return err
	}
	tk.token = ""
	d := credential.Dropped(cause)
	if err := tk.eng.NoteReason(machine.NoteUnauthenticated, d.Code, d.Reason, d.Detail, started, func(r *store.Record, _ store.Tx) error {
		r.Token = store.TokenMeta{}
		return nil
	}); err != nil {
		return err
	}
	grant, err := readSecretFile(tk.Cfg.BootstrapPath)
	if untrusted(err) {
		return err
	}
	if err != nil || grant == "" {
		return tk.blockUnauthenticated(cause, d.Reason, d.Block)
	}
	return tk.bootstrap(ctx, grant)
}

// withBearer makes one call that carries the token under PROTOCOL.md §1's rows for 401 and
// 403, which hold for every call (check-in, bundle, lease, report): a 401 drops the token and,
// when a fresh bootstrap grant is on disk, logs in with it and makes the call once more in the
// same tick (a second 401 blocks); without a grant the machine blocks (exit 1). A 403
// AGENT_ENV_MISMATCH blocks with exit 78, and later ticks touch no network until the config
// changes or `resume`. call must read tk.token when it runs (the token may change in between).
func (tk *tick) withBearer(ctx context.Context, call func() error) error {
	started := tk.Now()
	err := call()
	if err != nil && effects.KindOf(err) == effects.Unauthenticated {
		if rerr := tk.reauthenticate(ctx, err); rerr != nil {
			return rerr
		}
		err = call()
		if err != nil && effects.KindOf(err) == effects.Unauthenticated {
			return tk.blockUnauthenticated(err, vocab.ReasonTenancy401, "the fresh bootstrap grant's token was refused too")
		}
	}
	if err != nil && effects.KindOf(err) == effects.EnvMismatch {
		return tk.block(codeEnvMismatch, vocab.ReasonTenancy403, envMismatchWords(tk.Cfg.EnvID, tk.eng.Record().Token.EnvID, err), started, err)
	}
	return err
}

// readKV reads one secret. OpenBao answers 403 (permission denied) both for a path the policy
// does not grant and for a token it no longer honours (PROTOCOL.md §3); the manifest's paths
// were checked against the env's prefix before the lease, so a 403 is checked with lookup-self:
// a refused token is dropped like a refused bearer (a fresh grant on disk logs in and the read
// is made again, else Blocked) instead of failing the apply with the dead token kept.
func (tk *tick) readKV(ctx context.Context, path, key string, version int) (string, error) {
	v, err := tk.Fx.Bao.ReadKV(ctx, tk.token, path, key, version)
	var e *effects.Error
	if err == nil || !errors.As(err, &e) || e.Status != http.StatusForbidden {
		return v, err
	}
	if _, lerr := tk.Fx.Bao.LookupSelf(ctx, tk.token); lerr == nil || effects.IsTemporary(lerr) {
		return v, err // the token is fine: the path is refused
	} else if rerr := tk.reauthenticate(ctx, lerr); rerr != nil {
		return "", rerr
	}
	return tk.Fx.Bao.ReadKV(ctx, tk.token, path, key, version)
}

// LeaseLimit and LeaseWindow are tenancy's budget (machine.LeaseLimit per machine.LeaseWindow).
const (
	LeaseLimit  = machine.LeaseLimit
	LeaseWindow = machine.LeaseWindow
)

// reusableToken: a lease-derived token whose ttl (after a renew where needed) stays above
// renew_below_s reads the secrets; no new lease. A bootstrap token is swapped once. A lookup
// or renew that fails for a temporary reason is returned: it proves nothing about the token,
// and a lease asked on it would spend the budget for nothing.
func (tk *tick) reusableToken(ctx context.Context) (string, bool, error) {
	rec := tk.eng.Record()
	if rec.Token.Source != store.SourceLease || tk.token == "" {
		return "", false, nil
	}
	below := time.Duration(tk.Cfg.Bao.RenewBelow) * time.Second
	info, err := tk.Fx.Bao.LookupSelf(ctx, tk.token)
	if err != nil {
		if effects.IsTemporary(err) {
			return "", false, err
		}
		tk.Log.Debug().Msg("lease-derived token not reusable: " + err.Error())
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
	return &effects.Error{Op: "lease", Kind: effects.RateLimited, Code: vocab.LeaseBudget,
		Msg: fmt.Sprintf("lease budget %d/%d until %s", used, LeaseLimit, machine.Stamp(frees))}
}

// leaseRefused keeps tenancy's rate limit on a lease asked at now: no lease is asked before
// its Retry-After (a minute when it gave none, at most the budget's window). It returns err,
// with the rate limit's code when tenancy's 429 had none of its own.
func (tk *tick) leaseRefused(err error, now time.Time) error {
	var e *effects.Error
	if !errors.As(err, &e) || e.Kind != effects.RateLimited {
		return err
	}
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
	if e.Code == "" || e.Code == vocab.RateLimited {
		// tenancy's 429 without a code of its own: the entry carries the lease's code in its field
		cp := *e
		cp.Code = vocab.LeaseRateLimited
		return &cp
	}
	return err
}

// askLease asks tenancy for a lease unless the durable budget says it would be refused.
// Every lease asked is recorded before it is asked, granted or not.
func (tk *tick) askLease(ctx context.Context, reason string) (effects.Lease, error) {
	now := tk.Now()
	rec := tk.eng.Record()
	if now.Before(rec.LeaseRetryAfter) {
		return effects.Lease{}, &effects.Error{Op: "lease", Kind: effects.RateLimited, Code: vocab.LeaseRateLimited, Reason: vocab.ReasonAgentWait,
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
		return lease, tk.leaseRefused(err, now)
	}
	redact.Add(lease.LoginJWT)
	if err := credential.Check("lease", "the login_jwt in tenancy's lease", lease.LoginJWT); err != nil {
		return effects.Lease{}, err
	}
	if lease.Addr != "" && lease.Addr != tk.Cfg.Bao.Addr {
		tk.Log.Info().Msgf("lease names OpenBao at %s; the configured %s is used", lease.Addr, tk.Cfg.Bao.Addr)
	}
	return lease, nil
}

func (tk *tick) loggedIn(started time.Time, ttl time.Duration, jti, env, detail string) error {
	now := tk.Now()
	return tk.eng.Fire(machine.Outcome{Event: machine.EvLogin, Detail: detail, Update: func(r *store.Record, _ store.Tx) error {
		r.Token = store.TokenMeta{Present: true, Source: store.SourceLease, ExpiresAt: now.Add(ttl), CheckedAt: now, GrantJTI: jti, EnvID: env}
		r.LeaseJTI = ""
		return nil
	}}, started)
}

// leaseLogin swaps the token outside an apply (upkeep near the max ttl): lease, log in,
// replace the token. Journaled as notes; the machine's state does not change.
func (tk *tick) leaseLogin(ctx context.Context, reason string) error {
	started := tk.Now()
	lease, err := tk.askLease(ctx, reason)
	if err != nil && tk.isBlocked() {
		return err
	}
	if err != nil {
		tk.noteStop(machine.NoteLeaseDeferred, err, started, "")
		return err
	}
	t, err := tk.Fx.Bao.Login(ctx, tk.Cfg.Bao.AuthMount, tk.Cfg.Bao.Role, lease.LoginJWT)
	if err != nil {
		return err
	}
	redact.Add(t.Value)
	if err := credential.Check("bao login", "the token in OpenBao's answer", t.Value); err != nil {
		return err
	}
	if err := files.WriteAtomicFS(tk.fs(), tk.Cfg.TokenPath(), []byte(t.Value+"\n"), 0o600); err != nil {
		return err
	}
	failpoint.Hit("file:swap-token-written")
	old := tk.token
	tk.token = t.Value
	now := tk.Now()
	if err := tk.eng.Note(machine.NoteTokenSwap, "", fmt.Sprintf("token near its max ttl: leased (%s) and logged in again", reason), started, func(r *store.Record, _ store.Tx) error {
		r.Token = store.TokenMeta{Present: true, Source: store.SourceLease, ExpiresAt: now.Add(t.TTL), CheckedAt: now, GrantJTI: t.Meta["grant_jti"], EnvID: t.Meta["env_id"]}
		return nil
	}); err != nil {
		return err
	}
	_ = tk.Fx.Bao.RevokeSelf(ctx, old)
	return nil
}

// maxTokenTTL is OpenBao's max ttl for the agent's token (PROTOCOL.md §3: 30 days).
const maxTokenTTL = 30 * 24 * time.Hour

// credentialForApply gives an apply whose bundle reads secrets a token fit to read them
// (preflight's last part): reused when it can be, a grant kept from an interrupted tick when
// there is one, leased when it must be (planCredential) — never a lease on a guess.
func (tk *tick) credentialForApply(ctx context.Context, started time.Time) error {
	why, reusable, err := tk.reusableToken(ctx)
	var kept string
	if err == nil && !reusable {
		kept, _ = readSecretFile(tk.Cfg.GrantPath())
	}
	p := credential.PlanApply(why, reusable, err, kept, tk.Now())
	switch {
	case p.Stop:
		// OpenBao could not say whether the token lives: no lease on a guess; the next tick asks again
		tk.noteStopBecause(machine.NoteLeaseDeferred, vocab.ReasonReuseUnasked, err, started, "whether the token is reusable is asked again next tick")
		return err
	case p.Reuse:
		return tk.eng.Fire(machine.Outcome{Event: machine.EvReuse, Detail: p.Detail}, started)
	case p.KeptGrant:
		return tk.eng.Fire(machine.Outcome{Event: machine.EvLease, Detail: p.Detail, Update: func(r *store.Record, _ store.Tx) error {
			r.LeaseJTI = p.JTI
			return nil
		}}, started)
	}
	return tk.leaseForApply(ctx, started)
}

// leaseForApply asks tenancy for a lease for this apply and keeps its grant 0600 until the
// login. When tenancy cannot answer now, a working token applies and the swap waits.
func (tk *tick) leaseForApply(ctx context.Context, started time.Time) error {
	lease, err := tk.askLease(ctx, "apply")
	if local(err) || (err != nil && tk.isBlocked()) {
		return err
	}
	if err != nil {
		if effects.IsTemporary(err) {
			if tk.tokenWorks(ctx) {
				src := tk.eng.Record().Token.Source
				if src == "" {
					src = store.SourceBootstrap
				}
				return tk.eng.Fire(machine.Outcome{Event: machine.EvReuse, Code: effects.CodeOf(err), Reason: effects.ReasonOf(err), Detail: err.Error() + ": applying with the " + src + " token; the swap waits for the next apply"}, started)
			}
			tk.noteStop(machine.NoteLeaseDeferred, err, started, "")
			return err
		}
		return tk.fail(ctx, machine.BundleVerified, codeOr(err, vocab.LeaseFailed), err.Error(), false)
	}
	if err := files.WriteAtomicFS(tk.fs(), tk.Cfg.GrantPath(), []byte(lease.LoginJWT+"\n"), 0o600); err != nil {
		return err
	}
	failpoint.Hit("file:grant-written")
	tk.grantFresh = true
	used, _ := tk.leaseBudget()
	jti := credential.GrantJTI(lease.LoginJWT)
	return tk.eng.Fire(machine.Outcome{Event: machine.EvLease, Detail: fmt.Sprintf("lease granted (%d/%d this hour); grant kept 0600 until login", used, LeaseLimit), Update: func(r *store.Record, _ store.Tx) error {
		r.LeaseJTI = jti
		return nil
	}}, started)
}
