package states

import (
	"context"
	"fmt"
	"os"
	"os/user"
	"strconv"
	"strings"
	"time"

	"github.com/tikali/monky-deployd/internal/logging"
	"github.com/tikali/monky-deployd/internal/vocab"
	"github.com/tikali/monky-deployd/machine"
	"github.com/tikali/monky-deployd/store"
)

// Resume clears what parked the machine — a refusal, a failed apply's attempt counters, a
// block — so the next tick checks again. With dryRun it says what it would clear and
// changes nothing. It takes the tick lock: it never races a tick.
func (a *Agent) Resume(dryRun bool) ([]string, error) {
	cleared, lk, err := a.resume(dryRun)
	if lk != nil {
		lk.release()
	}
	return cleared, err
}

// ResumeHolding is Resume that keeps the tick lock when it succeeds: the caller hands it to
// the tick it runs next (TickHolding), so no other tick can run between the two (`resume
// --now`), or releases it. held is nil when Resume failed.
func (a *Agent) ResumeHolding(dryRun bool) (cleared []string, held *HeldLock, err error) {
	cleared, lk, err := a.resume(dryRun)
	if err != nil {
		if lk != nil {
			lk.release()
		}
		return cleared, nil, err
	}
	return cleared, &HeldLock{lk: lk}, nil
}

// HeldLock is the tick lock, held by this process and not yet handed to a tick.
type HeldLock struct{ lk *tickLock }

// Release lets the lock go without a tick.
func (h *HeldLock) Release() {
	if h.lk != nil {
		h.lk.release()
		h.lk = nil
	}
}

// TickHolding runs one tick under the lock h (taken by ResumeHolding), as Tick does once it has
// taken its own; the lock is released when the tick ends.
func (a *Agent) TickHolding(ctx context.Context, h *HeldLock) Result {
	a.defaults()
	lk := h.lk
	h.lk = nil
	return a.tickHolding(ctx, lk)
}

// resume is Resume; lk is the tick lock it took (nil when it took none).
func (a *Agent) resume(dryRun bool) (cleared []string, lk *tickLock, err error) {
	a.defaults()
	lk, held, err := lockFile(a.Cfg.LockPath())
	if err != nil {
		return nil, nil, err
	}
	if !held {
		return nil, nil, fmt.Errorf("a tick is running now; run resume again when it ends")
	}
	eng, err := machine.Load(a.Store, a.Now)
	if err != nil {
		return nil, lk, err
	}
	rec := eng.Record()
	ev, cleared := planResume(eng.State(), rec, a.Now())
	if ev == "" || dryRun {
		return cleared, lk, nil
	}
	// resume is journaled as a tick of its own, saying who ran it: it is not part of the
	// tick before it.
	envID := rec.EnvID
	if envID == "" {
		envID = a.Cfg.EnvID
	}
	if _, err := eng.BeginTick(envID); err != nil {
		return nil, lk, err
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
	end := eng.EndTick(machine.TickEnd{Exit: ExitCode(err), Action: vocab.ActionResume}, a.Retention)
	if err != nil {
		return cleared, lk, err
	}
	return cleared, lk, end
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
	// bootstrap is journaled as a tick of its own: its entries are not the tick's before it
	envID := eng.Record().EnvID
	if envID == "" {
		envID = a.Cfg.EnvID
	}
	n, err := eng.BeginTick(envID)
	if err != nil {
		return err
	}
	tk := a.newTick(eng)
	tk.number = n
	tk.Log = a.Log.With().Uint64(logging.FieldTick, n).Logger()
	err = tk.bootstrapUnblocking(ctx, grant)
	if end := eng.EndTick(machine.TickEnd{Exit: ExitCode(err), Action: vocab.ActionBootstrap}, a.Retention); err == nil {
		err = end
	}
	return err
}

// bootstrapUnblocking clears a block (a refused bearer, a pinned env) and logs in with grant.
func (tk *tick) bootstrapUnblocking(ctx context.Context, grant string) error {
	if tk.eng.State() == machine.Blocked {
		if err := tk.eng.Fire(machine.Outcome{Event: machine.EvUnblock, Detail: "unblocked: bootstrap with a new grant", Update: func(r *store.Record, _ store.Tx) error {
			r.Block = nil
			return nil
		}}, tk.Now()); err != nil {
			return err
		}
	}
	return tk.bootstrap(ctx, grant)
}
