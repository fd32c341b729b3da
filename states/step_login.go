package states

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

// stepLogin: Leased → LoggedIn | Failed. Log in with the kept grant, store the token, delete
// the grant.
//
// Idempotent across a crash, and decided by identity, never by timing: a tick that resumes in
// Leased asks OpenBao who the stored token is (lookup-self); when its grant_jti is the kept
// grant's jti (or, the grant already removed, the jti recorded with the lease), the login
// happened before the kill and is not repeated (planLogin). A lookup that fails for a temporary
// reason ends the tick: the next one asks again rather than risk a second login.
func (tk *tick) stepLogin(ctx context.Context) error {
	started := tk.Now()
	rec := tk.eng.Record()
	grant, err := readSecretFile(tk.Cfg.GrantPath())
	if err != nil {
		return err
	}
	in := loginInput{grant: grant, now: tk.Now(), leaseJTI: rec.LeaseJTI, tokenGrantJTI: rec.Token.GrantJTI}
	if !tk.grantFresh && tk.token != "" {
		in.looked = true
		in.info, in.lookupErr = tk.Fx.Bao.LookupSelf(ctx, tk.token)
	}
	p := planLogin(in)
	switch {
	case p.stop:
		tk.noteStop(machine.NoteLoginFailed, in.lookupErr, started, "whether the kept grant was used is asked again next tick")
		return in.lookupErr
	case p.done && p.consume:
		consumed := "grant consumed (deleted)"
		if err := files.RemoveFS(tk.fs(), tk.Cfg.GrantPath()); err != nil {
			consumed = "the kept grant could NOT be deleted (" + err.Error() + ")"
		}
		return tk.loggedIn(started, in.info.TTL, in.info.GrantJTI, in.info.EnvID, p.detail+"; "+consumed)
	case p.done:
		return tk.loggedIn(started, in.info.TTL, in.info.GrantJTI, in.info.EnvID, p.detail)
	case p.lease:
		var ok bool
		if grant, ok, err = tk.leaseAgain(ctx); !ok {
			return err
		}
	}
	return tk.login(ctx, started, grant)
}

// loginInput is what a login step reads before it decides: the kept grant, the record's jtis
// and, when the tick holds a token it did not just lease for, who that token is (lookup-self).
type loginInput struct {
	grant         string // the kept grant, "" when gone
	now           time.Time
	leaseJTI      string // the jti recorded with the lease
	tokenGrantJTI string // the grant jti of the token the record describes
	looked        bool   // lookup-self was asked
	info          effects.TokenInfo
	lookupErr     error
}

// loginPlan is how a login step goes on.
type loginPlan struct {
	stop    bool   // OpenBao could not say who the token is: the next tick asks again
	done    bool   // the login happened before a restart: committed as it is, no new login
	consume bool   // with done: the kept grant was used, and is deleted
	detail  string // with done: the entry's words
	lease   bool   // the kept grant is gone or expired: lease again before the login
}

// planLogin decides, from what the step read, whether the login already happened (the token is
// the kept grant's, or the lease's when the grant is gone; or, in a state file from before
// lease_jti was recorded, a token of a grant the record does not know), must wait, or is done
// now — with a new lease first when the kept grant is gone or expired.
func planLogin(in loginInput) loginPlan {
	if in.looked {
		jti := in.leaseJTI
		if in.grant != "" {
			jti = credential.GrantJTI(in.grant)
		}
		ok := in.lookupErr == nil
		switch {
		case !ok && effects.IsTemporary(in.lookupErr):
			return loginPlan{stop: true}
		case ok && jti != "" && in.info.GrantJTI == jti:
			return loginPlan{done: true, consume: true, detail: "logged in before a restart"}
		case ok && jti == "" && in.grant == "" && in.info.GrantJTI != "" && in.info.GrantJTI != in.tokenGrantJTI:
			// a state file from before lease_jti was recorded
			return loginPlan{done: true, detail: "logged in before a restart"}
		}
	}
	return loginPlan{lease: in.grant == "" || credential.GrantExpired(in.grant, in.now)}
}

// leaseAgain replaces a kept grant that is gone or expired with a new lease's: the grant, or
// not ok and why the step ends (a failure of the apply is committed as such).
func (tk *tick) leaseAgain(ctx context.Context) (grant string, ok bool, err error) {
	_ = files.RemoveFS(tk.fs(), tk.Cfg.GrantPath())
	lease, err := tk.askLease(ctx, "apply")
	if err != nil {
		if effects.IsTemporary(err) || local(err) || tk.isBlocked() {
			return "", false, err
		}
		return "", false, tk.failBecause(ctx, machine.Leased, codeOr(err, vocab.LeaseFailed), effects.ReasonOf(err), err.Error(), false)
	}
	grant = lease.LoginJWT
	if err := files.WriteAtomicFS(tk.fs(), tk.Cfg.GrantPath(), []byte(grant+"\n"), 0o600); err != nil {
		return "", false, err
	}
	failpoint.Hit("file:grant-written")
	jti := credential.GrantJTI(grant)
	if err := tk.eng.Save(func(r *store.Record, _ store.Tx) error { r.LeaseJTI = jti; return nil }); err != nil {
		return "", false, err
	}
	tk.Log.Debug().Msg("the kept grant was gone or expired: leased again")
	return grant, true, nil
}

// login logs in with grant, stores the token, deletes the grant and commits LoggedIn; the
// token it replaced is revoked.
func (tk *tick) login(ctx context.Context, started time.Time, grant string) error {
	t, err := tk.Fx.Bao.Login(ctx, tk.Cfg.Bao.AuthMount, tk.Cfg.Bao.Role, grant)
	if err != nil {
		if effects.IsTemporary(err) {
			tk.noteStop(machine.NoteLoginFailed, err, started, "grant kept for the next tick")
			return err
		}
		return tk.failBecause(ctx, machine.Leased, codeOr(err, vocab.BaoLoginRefused), effects.ReasonOf(err), err.Error(), false)
	}
	redact.Add(t.Value)
	if err := credential.Check("bao login", "the token in OpenBao's answer", vocab.ReasonBaoAnswerShape, t.Value); err != nil {
		return tk.failBecause(ctx, machine.Leased, effects.CodeOf(err), effects.ReasonOf(err), err.Error(), false)
	}
	old := tk.token
	if err := files.WriteAtomicFS(tk.fs(), tk.Cfg.TokenPath(), []byte(t.Value+"\n"), 0o600); err != nil {
		return err
	}
	failpoint.Hit("file:token-written")
	tk.token = t.Value
	if err := files.RemoveFS(tk.fs(), tk.Cfg.GrantPath()); err != nil {
		return err
	}
	failpoint.Hit("file:grant-removed")
	if err := tk.loggedIn(started, t.TTL, t.Meta["grant_jti"], t.Meta["env_id"], fmt.Sprintf("logged in with the lease's grant (ttl %s); token replaced", t.TTL.Round(time.Second))); err != nil {
		return err
	}
	if old != "" && old != t.Value {
		if err := tk.Fx.Bao.RevokeSelf(ctx, old); err != nil {
			tk.Log.Info().Msg("revoking the replaced token: " + err.Error())
		}
	}
	return nil
}
