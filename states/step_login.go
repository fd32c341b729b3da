package states

import (
	"context"
	"fmt"
	"time"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/effects/files"
	"github.com/tikali/monky-deployd/internal/failpoint"
	"github.com/tikali/monky-deployd/internal/redact"
	"github.com/tikali/monky-deployd/machine"
	"github.com/tikali/monky-deployd/store"
)

// stepLogin: Leased → LoggedIn | Failed. Log in with the kept grant, store the token, delete
// the grant.
//
// Idempotent across a crash, and decided by identity, never by timing: a tick that resumes in
// Leased asks OpenBao who the stored token is (lookup-self); when its grant_jti is the kept
// grant's jti (or, the grant already removed, the jti recorded with the lease), the login
// happened before the kill and is not repeated. A lookup that fails for a temporary reason
// ends the tick: the next one asks again rather than risk a second login.
func (tk *tick) stepLogin(ctx context.Context) error {
	started := tk.Now()
	rec := tk.eng.Record()
	grant, err := readSecretFile(tk.Cfg.GrantPath())
	if err != nil {
		return err
	}
	if !tk.grantFresh && tk.token != "" {
		jti := rec.LeaseJTI
		if grant != "" {
			jti = grantJTI(grant)
		}
		info, err := tk.Fx.Bao.LookupSelf(ctx, tk.token)
		switch {
		case err != nil && effects.IsTemporary(err):
			tk.noteStop(machine.NoteLoginFailed, err, started, "whether the kept grant was used is asked again next tick")
			return err
		case err == nil && jti != "" && info.GrantJTI == jti:
			consumed := "grant consumed (deleted)"
			if err := files.RemoveFS(tk.fs(), tk.Cfg.GrantPath()); err != nil {
				consumed = "the kept grant could NOT be deleted (" + err.Error() + ")"
			}
			return tk.loggedIn(started, info.TTL, info.GrantJTI, info.EnvID, "logged in before a restart; "+consumed)
		case err == nil && jti == "" && grant == "" && info.GrantJTI != "" && info.GrantJTI != rec.Token.GrantJTI:
			// a state file from before lease_jti was recorded
			return tk.loggedIn(started, info.TTL, info.GrantJTI, info.EnvID, "logged in before a restart")
		}
	}
	if grant == "" || grantExpired(grant, tk.Now()) {
		_ = files.RemoveFS(tk.fs(), tk.Cfg.GrantPath())
		lease, err := tk.askLease(ctx, "apply")
		if err != nil {
			if effects.IsTemporary(err) || local(err) || tk.isBlocked() {
				return err
			}
			return tk.fail(ctx, machine.Leased, codeOr(err, "LEASE_FAILED"), err.Error(), false)
		}
		grant = lease.LoginJWT
		if err := files.WriteAtomicFS(tk.fs(), tk.Cfg.GrantPath(), []byte(grant+"\n"), 0o600); err != nil {
			return err
		}
		failpoint.Hit("file:grant-written")
		jti := grantJTI(grant)
		if err := tk.eng.Save(func(r *store.Record, _ store.Tx) error { r.LeaseJTI = jti; return nil }); err != nil {
			return err
		}
		tk.Log.Debug().Msg("the kept grant was gone or expired: leased again")
	}
	t, err := tk.Fx.Bao.Login(ctx, tk.Cfg.Bao.AuthMount, tk.Cfg.Bao.Role, grant)
	if err != nil {
		if effects.IsTemporary(err) {
			tk.noteStop(machine.NoteLoginFailed, err, started, "grant kept for the next tick")
			return err
		}
		return tk.fail(ctx, machine.Leased, codeOr(err, "BAO_LOGIN_REFUSED"), err.Error(), false)
	}
	redact.Add(t.Value)
	if err := checkCredential("bao login", "the token in OpenBao's answer", t.Value); err != nil {
		return tk.fail(ctx, machine.Leased, effects.CodeOf(err), err.Error(), false)
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
