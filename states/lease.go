package states

// The lease half of the credential's act: whether the token held is reused, the durable lease
// budget, a lease for an apply or for a swap near the token's max ttl. What is decided is
// decided in states/credential (PlanApply, PlanReuse, LeaseGate, Throttled); this file acts.

import (
	"context"
	"fmt"
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
	ttl := info.TTL
	r := credential.PlanReuse(ttl, err, below)
	if r == credential.ReuseRenew {
		ttl, err = tk.Fx.Bao.RenewSelf(ctx, tk.token, 24*time.Hour)
		r = credential.PlanRenewed(ttl, err, below)
	}
	switch r {
	case credential.ReuseAsk:
		return "", false, err
	case credential.ReuseNo:
		if err != nil {
			tk.Log.Debug().Msg("lease-derived token not reusable: " + err.Error())
		}
		return "", false, nil
	}
	now := tk.Now()
	_ = tk.eng.Save(func(r *store.Record, _ store.Tx) error {
		r.Token.ExpiresAt, r.Token.CheckedAt = now.Add(ttl), now
		return nil
	})
	return credential.ReuseWords(ttl), true, nil
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

// leaseRefused keeps tenancy's rate limit on a lease asked at now (credential.Throttled): no
// lease is asked before its Retry-After. It returns err, coded as the plan says.
func (tk *tick) leaseRefused(err error, now time.Time) error {
	wait, out := credential.Throttled(err)
	if wait > 0 {
		_ = tk.eng.Save(func(r *store.Record, _ store.Tx) error {
			r.LeaseRetryAfter = now.Add(wait)
			return nil
		})
	}
	return out
}

// askLease asks tenancy for a lease unless the durable budget says it would be refused.
// Every lease asked is recorded before it is asked, granted or not.
func (tk *tick) askLease(ctx context.Context, reason string) (effects.Lease, error) {
	now := tk.Now()
	used, frees := tk.leaseBudget()
	if err := credential.LeaseGate(now, tk.eng.Record().LeaseRetryAfter, used, frees); err != nil {
		return effects.Lease{}, err
	}
	var lease effects.Lease
	asked := 0
	err := tk.withBearer(ctx, func() error {
		if asked > 0 {
			// asked again with a fresh token: only when the budget still affords it
			if err := credential.BudgetGate(tk.leaseBudget()); err != nil {
				return err
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
	if err := credential.Check("lease", "the login_jwt in tenancy's lease", vocab.ReasonLeaseShape, lease.LoginJWT); err != nil {
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
	if err := credential.Check("bao login", "the token in OpenBao's answer", vocab.ReasonBaoAnswerShape, t.Value); err != nil {
		return err
	}
	if err := files.WriteAtomicFS(tk.fs(), tk.Cfg.TokenPath(), []byte(t.Value+"\n"), 0o600); err != nil {
		return err
	}
	failpoint.Hit("file:swap-token-written")
	old := tk.token
	tk.token = t.Value
	now := tk.Now()
	if err := tk.eng.Note(machine.NoteTokenSwap, "", "", fmt.Sprintf("token near its max ttl: leased (%s) and logged in again", reason), started, func(r *store.Record, _ store.Tx) error {
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
		return tk.failBecause(ctx, machine.BundleVerified, codeOr(err, vocab.LeaseFailed), effects.ReasonOf(err), err.Error(), false)
	}
	if err := files.WriteAtomicFS(tk.fs(), tk.Cfg.GrantPath(), []byte(lease.LoginJWT+"\n"), 0o600); err != nil {
		return err
	}
	failpoint.Hit("file:grant-written")
	tk.grantFresh = true
	used, _ := tk.leaseBudget()
	jti := credential.GrantJTI(lease.LoginJWT)
	return tk.eng.Fire(machine.Outcome{Event: machine.EvLease, Detail: credential.LeaseWords(used), Update: func(r *store.Record, _ store.Tx) error {
		r.LeaseJTI = jti
		return nil
	}}, started)
}
