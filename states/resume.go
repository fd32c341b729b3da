package states

import (
	"context"
	"fmt"
	"os"
	"os/user"
	"strconv"
	"strings"
	"time"

	"github.com/tikali/monky-deployd/internal/vocab"
	"github.com/tikali/monky-deployd/machine"
	"github.com/tikali/monky-deployd/store"
)

// Resume clears what parked the machine — a refusal, a failed apply's attempt counters, a
// block — so the next tick checks again. With dryRun it says what it would clear and
// changes nothing. It takes the tick lock: it never races a tick.
func (a *Agent) Resume(dryRun bool) ([]string, error) {
	a.defaults()
	lk, held, err := lockFile(a.Cfg.LockPath())
	if err != nil {
		return nil, err
	}
	if !held {
		return nil, fmt.Errorf("a tick is running now; run resume again when it ends")
	}
	defer lk.release()
	eng, err := machine.Load(a.Store, a.Now)
	if err != nil {
		return nil, err
	}
	rec := eng.Record()
	ev, cleared := planResume(eng.State(), rec, a.Now())
	if ev == "" || dryRun {
		return cleared, nil
	}
	// resume is journaled as a tick of its own, saying who ran it: it is not part of the
	// tick before it.
	envID := rec.EnvID
	if envID == "" {
		envID = a.Cfg.EnvID
	}
	if _, err := eng.BeginTick(envID); err != nil {
		return nil, err
	}
	box := BoxOf(a.Cfg, a.Host)
	eng.Defer(func(r *store.Record) { r.Box = box })
	started := a.Now()
	detail := "resume by " + a.operator() + ": cleared " + strings.Join(cleared, "; ") + " — the next tick checks again"
	if len(cleared) == 0 {
		detail = "resume by " + a.operator() + ": the next tick checks again"
	}
	err = eng.Fire(machine.Outcome{Event: ev, Detail: detail, Update: func(r *store.Record, _ store.Tx) error {
		r.Refusal, r.Failure, r.Block = nil, nil, nil
		r.Attempts, r.NextRetryAt, r.Parked = nil, timeZero, false
		return nil
	}}, started)
	if err != nil {
		return cleared, err
	}
	return cleared, eng.EndTick(machine.TickEnd{Exit: vocab.ExitOK, Action: vocab.ActionResume}, a.Retention)
}

// planResume is what a resume of a machine in st clears: the event that clears it ("" when
// st is not parked) and the words for each thing cleared, with what it cannot clear (tenancy's
// Retry-After on leases, until now passes it).
func planResume(st machine.State, rec store.Record, now time.Time) (ev string, cleared []string) {
	switch st {
	case machine.Refused:
		ev = machine.EvResume
		if rec.Refusal != nil {
			cleared = append(cleared, fmt.Sprintf("refusal %s of %s (%s)", rec.Refusal.Code, machine.ShortSha(rec.Refusal.Sha), rec.Refusal.Detail))
		}
	case machine.Failed:
		ev = machine.EvResume
		if rec.Failure != nil {
			cleared = append(cleared, fmt.Sprintf("failure %s of %s after %d attempt(s)%s", rec.Failure.Code, machine.ShortSha(rec.Failure.Sha), rec.TotalAttempts(), parkedWord(rec.Parked)))
		}
	case machine.Blocked:
		ev = machine.EvUnblock
		if rec.Block != nil {
			cleared = append(cleared, fmt.Sprintf("block %s (%s)", rec.Block.Code, rec.Block.Detail))
		}
	}
	if !rec.LeaseRetryAfter.IsZero() && rec.LeaseRetryAfter.After(now) {
		cleared = append(cleared, "nothing about the lease budget: tenancy's Retry-After still holds until "+machine.Stamp(rec.LeaseRetryAfter))
	}
	return ev, cleared
}

// operator names who runs this command: uid and user, and the sudo user behind root.
func (a *Agent) operator() string {
	if a.Operator != "" {
		return a.Operator
	}
	uid := os.Getuid()
	name := "?"
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil {
		name = u.Username
	}
	who := fmt.Sprintf("uid %d (%s)", uid, name)
	if s := os.Getenv("SUDO_USER"); s != "" && uid == 0 {
		who += " via sudo by " + s
	}
	return who
}

func parkedWord(p bool) string {
	if p {
		return ", parked"
	}
	return ""
}

// BootstrapCommand is `monky-deployd bootstrap`: log in with the bootstrap grant now. A stored
// token is kept unless force; a block on a refused bearer is cleared by the new token.
func (a *Agent) BootstrapCommand(ctx context.Context, force bool) error {
	a.defaults()
	lk, held, err := lockFile(a.Cfg.LockPath())
	if err != nil {
		return err
	}
	if !held {
		return fmt.Errorf("a tick is running now; run bootstrap again when it ends")
	}
	defer lk.release()
	eng, err := machine.Load(a.Store, a.Now)
	if err != nil {
		return err
	}
	if tok, _ := readSecretFile(a.Cfg.TokenPath()); tok != "" && !force {
		return fmt.Errorf("a token is stored at %s; the grant stays unused (use --force to replace the token)", a.Cfg.TokenPath())
	}
	grant, err := readSecretFile(a.Cfg.BootstrapPath)
	if err != nil {
		return err
	}
	if grant == "" {
		if _, err := os.Lstat(a.Cfg.BootstrapPath); err == nil {
			// a used grant is emptied where its directory is not writable; or the kit wrote nothing
			return fmt.Errorf("the bootstrap grant at %s is empty (a used grant is emptied) — copy a fresh grant from the install kit there", a.Cfg.BootstrapPath)
		}
		return fmt.Errorf("no bootstrap grant at %s — re-run the install kit", a.Cfg.BootstrapPath)
	}
	if eng.State() == machine.Blocked {
		if err := eng.Fire(machine.Outcome{Event: machine.EvUnblock, Detail: "unblocked: bootstrap with a new grant", Update: func(r *store.Record, _ store.Tx) error {
			r.Block = nil
			return nil
		}}, a.Now()); err != nil {
			return err
		}
	}
	return a.newTick(eng).bootstrap(ctx, grant)
}
