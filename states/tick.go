package states

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/effects/files"
	"github.com/tikali/monky-deployd/internal/config"
	"github.com/tikali/monky-deployd/internal/logging"
	"github.com/tikali/monky-deployd/internal/model"
	"github.com/tikali/monky-deployd/internal/phase"
	"github.com/tikali/monky-deployd/internal/vocab"
	"github.com/tikali/monky-deployd/machine"
	"github.com/tikali/monky-deployd/machine/explain"
	"github.com/tikali/monky-deployd/states/credential"
	"github.com/tikali/monky-deployd/store"
)

// Tick runs one tick: the lock, the check-in, and the machine as far as it can go now.
// Two ticks never run at once: a second one returns exit 0 at once. Its phases, in order:
// enter (the lock), open (the state file read, the tick begun), settle (the box readied before
// any network call), work (the check-in and the machine, under the tick's deadline), decide
// (the exit code), end (the tick's end committed) and finish (compaction, the closing line).
func (a *Agent) Tick(ctx context.Context) Result {
	a.defaults()
	lk, res, held := a.enter()
	if !held {
		if res.Err != nil {
			EndEarly(a.Log, "", res.Err)
		}
		return res
	}
	return a.tickHolding(ctx, lk)
}

// tickHolding runs the tick under lk, which it releases when the tick ends. A failure before
// the tick began ends with its closing line (and a journal entry where the file can be
// written); once begun, the tick always ends: decide, end and finish run whatever failed.
func (a *Agent) tickHolding(ctx context.Context, lk *tickLock) Result {
	defer lk.release()
	phase.Mark("lock")
	tk, fresh, future, err := a.open()
	if err != nil {
		if !errors.Is(err, store.ErrLocked) {
			a.traceEarly(err)
		}
		return EndEarly(a.Log, "", err)
	}
	defer tk.closeArchives()
	began := tk.Now()
	res := tk.end(tk.decide(tk.work(ctx, tk.settle(fresh, future))))
	phase.Mark("commit")
	tk.finish(res, tk.Now().Sub(began))
	return res
}

// enter takes the tick's lock, once the state dir and the files the agent trusts are fit:
// held is false when the tick goes no further (res says how it ended: another tick holds the
// lock, exit 0; or the lock cannot be taken).
func (a *Agent) enter() (lk *tickLock, res Result, held bool) {
	if err := os.MkdirAll(a.Cfg.StateDir, 0o700); err != nil {
		return nil, Result{Exit: vocab.ExitFail, Err: fmt.Errorf("state dir: %w", err)}, false
	}
	if err := CheckTrust(a.Cfg); err != nil {
		return nil, Result{Exit: vocab.ExitFail, Err: err}, false
	}
	lk, held, err := a.takeLock()
	if err != nil {
		// the lock file is unusable: the tick still leaves its trace
		a.traceEarly(err)
		return nil, Result{Exit: vocab.ExitFail, Err: err}, false
	}
	if !held {
		a.Log.Debug().Msg("another tick holds the lock; nothing to do")
		return nil, Result{Exit: vocab.ExitOK}, false
	}
	return lk, Result{}, true
}

// open reads the state file (the tick's reads before its check-in, in one open of it) and
// begins the tick: its number, on every line it logs. fresh: the state file had never recorded
// anything a takeover could clobber; future: the lease-budget entries recorded in the future.
func (a *Agent) open() (tk *tick, fresh bool, future int, err error) {
	outboxEmpty := false
	eng, err := machine.LoadWith(a.Store, a.Now, func(tx store.Tx) error {
		q, err := tx.Outbox()
		if err != nil {
			return err
		}
		outboxEmpty = len(q) == 0
		future, err = futureLeases(tx, a.Now())
		return err
	})
	if err != nil {
		return nil, false, 0, err
	}
	tk = a.newTick(eng)
	tk.outboxEmpty = outboxEmpty
	eng.OnTransition = tk.logTransition
	eng.OnNote = tk.logNote
	fresh = tk.fresh()
	n, err := eng.BeginTick(tk.Cfg.EnvID)
	if err != nil {
		return nil, false, 0, fmt.Errorf("begin tick: %w", err)
	}
	tk.number = n
	tk.recordBox()
	// every line of this tick carries its number (loop mode runs many ticks on one logger)
	tk.Log = a.Log.With().Uint64(logging.FieldTick, n).Logger()
	return tk, fresh, future, nil
}

// settle readies the box before any network call: a box upgraded in place from 0.1.x is taken
// over (its token, applied sha and releases), the temp files a kill left are settled, the box's
// secrets are masked and times recorded in the future corrected. A takeover that fails, or a
// temp file that cannot be settled, is the error that ends the tick before its work.
func (tk *tick) settle(fresh bool, future int) error {
	if fresh {
		if err := tk.takeover(); err != nil {
			return fmt.Errorf("take over: %w", err)
		}
	}
	leftovers := tk.cleanLeftovers()
	tk.maskBoxSecrets()
	if err := tk.correctClock(future); err != nil {
		tk.Log.Warn().Msg("clock check: " + err.Error())
	}
	return leftovers
}

// work runs the tick's body (run) under its deadline, unless settling the box failed
// (unsettled): a temporary or local fault met past tick_timeout_s is the deadline's, said as such.
func (tk *tick) work(ctx context.Context, unsettled error) error {
	parent := ctx
	if tk.TickTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, tk.TickTimeout)
		defer cancel()
	}
	phase.Mark("state-read")
	err := unsettled
	if err == nil {
		err = tk.run(ctx)
	}
	if pastDeadline(ctx) && parent.Err() == nil && err != nil && (effects.IsTemporary(err) || local(err)) && !tk.isBlocked() {
		cause := err
		err = tk.errTickTimeout()
		detail := fmt.Sprintf("the tick ran past tick_timeout_s (%s) and stopped at a step boundary, at %s; the next tick resumes there (%s)",
			tk.TickTimeout, tk.eng.State(), cause.Error())
		_ = tk.eng.Note(machine.NoteTickEnd, vocab.TickDeadline, "", detail, tk.Now(), nil)
	}
	return err
}

// decide is how the tick ends, from its error: the exit code, the reason journaled when it
// ended early (exit 75 or 1); a temporary fault in laptop mode is exit 0.
func (tk *tick) decide(err error) Result {
	res := Result{Exit: ExitCode(err), Err: err, IntervalS: tk.eng.Record().IntervalS, Tick: tk.number}
	// a state file another process holds past the wait takes no note either: the end tries once
	if (res.Exit == vocab.ExitTemporary || res.Exit == vocab.ExitFail) && !errors.Is(err, store.ErrLocked) {
		tk.journalEnd(err)
	}
	if err != nil && tk.Cfg.LaptopMode && res.Exit == vocab.ExitTemporary {
		tk.Log.Debug().Msg("offline (laptop mode): " + err.Error())
		res = Result{Exit: vocab.ExitOK, IntervalS: res.IntervalS, Tick: tk.number}
	}
	return res
}

// end commits the tick's end (with a heartbeat's writes, when it has them) and reads the box's
// verdict in its transaction. An end that cannot be committed fails a tick that was to exit 0.
func (tk *tick) end(res Result) Result {
	var err error
	if tk.tail != nil {
		err = tk.endWithTail(res.Exit)
	} else {
		err = tk.eng.EndTick(tk.tickEnd(res.Exit), tk.Retention)
	}
	if err != nil {
		tk.Log.Error().Err(err).Msg("end tick")
		if res.Exit == vocab.ExitOK {
			res = Result{Exit: ExitCode(err), Err: err, IntervalS: res.IntervalS, Tick: tk.number}
		}
	}
	return res
}

// endWithTail commits a heartbeat's transitions and the tick's end: one open, one commit
// (docs/MACHINE.md).
func (tk *tick) endWithTail(exit int) error {
	tail := tk.tail
	err := tk.eng.Batch(func() error {
		if err := tail(); err != nil {
			return err
		}
		return tk.eng.EndTick(tk.tickEnd(exit), tk.Retention)
	})
	if err != nil {
		// nothing of the heartbeat was written: the tick's header still says how it ended
		_ = tk.eng.EndTick(machine.TickEnd{Exit: ExitCode(err), Action: tk.action}, tk.Retention)
	}
	return err
}

// tickEnd is the tick's end, with exit, as committed.
func (tk *tick) tickEnd(exit int) machine.TickEnd {
	tk.recordBox()
	return machine.TickEnd{Exit: exit, Action: tk.action, Read: tk.readVerdict}
}

// recordBox writes what decides this tick into the record with its next commit (store.Box):
// the host, the paths, the config values a verdict reads, and whether a bootstrap grant lies on
// disk — so a copy of the file names this box's own paths and keys in its fix lines.
func (tk *tick) recordBox() {
	b := BoxOf(tk.Cfg, tk.Host)
	tk.eng.Defer(func(r *store.Record) { r.Box = b })
}

// BoxOf is what cfg decides on host (store.Box), with whether its bootstrap grant is on disk now.
func BoxOf(cfg *config.Config, host string) store.Box {
	_, err := os.Lstat(cfg.BootstrapPath)
	return store.Box{Host: host, StateDir: cfg.StateDir, DeployDir: cfg.DeployDir, Config: cfg.Path,
		BootstrapPath: cfg.BootstrapPath, BaoCAFile: cfg.Bao.CAFile, BaoAddr: cfg.Bao.Addr, BaoAuthMount: cfg.Bao.AuthMount, BaoRole: cfg.Bao.Role, Project: cfg.ComposeProject,
		HealthyTimeoutS: cfg.HealthyTimeoutS, DiskFactor: cfg.Disk.Factor, DiskHeadroomBytes: cfg.Disk.HeadroomBytes,
		VolumesOnAbsent: cfg.VolumesOnAbsent, StuckAfterS: cfg.StuckAfterS, StaleAfterS: cfg.StaleAfterS,
		GrantOnDisk: err == nil, User: UserName(), Transport: cfg.Transport, Identity: cfg.Identity}
}

// UserName is the name of the user the agent runs as (its uid when it has none), which a fix
// line's sudo -u names; a test may change it.
var UserName = func() string {
	uid := strconv.Itoa(os.Geteuid())
	if u, err := user.LookupId(uid); err == nil {
		return u.Username
	}
	return "#" + uid
}

// readVerdict reads the box's verdict, in the tick's end's transaction: its closing line's
// priority.
func (tk *tick) readVerdict(tx store.Tx) error {
	lim := explain.LimitsOf(tk.Cfg)
	lim.TickRunning = true // this tick holds the lock
	if _, v, err := explain.WhyOf(tx, tk.Now(), lim); err == nil {
		tk.verdict = &v
	}
	return nil
}

// finish compacts the state file when it is due and logs the tick's closing line.
func (tk *tick) finish(res Result, took time.Duration) {
	tk.compact(tk.eng.Record().Tick)
	tk.logEnd(res, took)
}

// run is the tick's body; its error decides the exit code.
func (tk *tick) run(ctx context.Context) error {
	if tk.eng.State() == machine.Blocked {
		if err := tk.checkBlock(); err != nil {
			return err
		}
	}
	if err := tk.ensureToken(ctx); err != nil {
		return err
	}
	phase.Mark("token")
	if rec := tk.eng.Record(); !rec.SeenAt.IsZero() {
		tk.before, tk.beforeAt = rec.Containers, rec.SeenAt
	}
	tk.listedFrom = tk.Now()
	containers, psErr := tk.ps(ctx)
	tk.listed, tk.listErr, tk.listedBy = containers, psErr, tk.Now()
	phase.Mark("compose-ps")
	tk.hold()
	resp, err := tk.checkin(ctx, containers)
	if err != nil {
		return err
	}
	phase.Mark("check-in")
	tk.action = resp.Action
	tk.keepOnlyDesiredBundle(resp)
	if err := tk.flushOutbox(ctx); err != nil && !effects.IsTemporary(err) {
		return err
	}
	switch resp.Action {
	case vocab.ActionNone:
		err = tk.heartbeat(ctx, resp, containers, psErr)
	case vocab.ActionDown:
		err = tk.retire(ctx, resp)
	case vocab.ActionApply:
		if tk.held != nil {
			err = tk.heldApply(ctx, resp, containers, psErr)
		} else {
			err = tk.apply(ctx, resp)
		}
	default:
		err = &effects.Error{Op: "checkin", Kind: effects.Permanent, Code: vocab.CheckinShape, Msg: fmt.Sprintf("unknown action %q", resp.Action)}
	}
	if err != nil {
		return err
	}
	// A report that could not be sent keeps the tick temporary: the next one sends it.
	if n := tk.pendingReports(); n > 0 {
		return &effects.Error{Op: "report", Kind: effects.Temporary, Msg: fmt.Sprintf("%d report(s) wait in the outbox for tenancy", n)}
	}
	return nil
}

// kvMount is the KV mount: tenancy's vault.mount when it named one, else the config's.
func (tk *tick) kvMount() string {
	if m := tk.eng.Record().KVMount; m != "" {
		return m
	}
	return tk.Cfg.Bao.KVMount
}

func toStore(cs []effects.Container) []store.Container {
	if cs == nil {
		return nil
	}
	out := make([]store.Container, len(cs))
	for i, c := range cs {
		out[i] = store.Container(c)
	}
	return out
}

func fromStore(cs []store.Container) []effects.Container {
	out := make([]effects.Container, len(cs))
	for i, c := range cs {
		out[i] = effects.Container(c)
	}
	return out
}

// ps lists the project's containers when a release is current; an error is logged and
// the check-in goes without them. The error is returned for the heartbeat: a release that is
// no longer what was verified is its report's fault, not the containers' absence.
func (tk *tick) ps(ctx context.Context) ([]effects.Container, error) {
	dir := tk.currentDir()
	if _, err := os.Stat(dir); err != nil {
		return []effects.Container{}, nil
	}
	cs, err := tk.Fx.Compose.PS(ctx, dir)
	if err != nil {
		tk.Log.Warn().Msg("compose ps: " + err.Error())
		return []effects.Container{}, err
	}
	return cs, nil
}

func (a *Agent) currentDir() string { return a.Cfg.DeployDir + "/current" }

// compacter is a store whose file can be rewritten without its free pages.
type compacter interface {
	CompactIfNeeded(threshold float64) (bool, error)
}

// compact rewrites the state file when half of it is free pages, as often as retention runs.
func (tk *tick) compact(n uint64) {
	c, ok := tk.Store.(compacter)
	if !ok || n%machine.PruneEvery != 0 {
		return
	}
	if done, err := c.CompactIfNeeded(0.5); err != nil {
		tk.Log.Warn().Msg("compact state file: " + err.Error())
	} else if done {
		tk.Log.Info().Msg("state file compacted")
	}
}

// journalEnd makes the reason a tick ended early (exit 75 or 1) a journal entry, unless the
// tick's last entry already says it: an unacknowledged report, a temporary fault at any step,
// the deadline, a local fault. A copy of the state file then explains every tick.
func (tk *tick) journalEnd(err error) {
	if err == nil {
		return
	}
	code, detail := endWords(err)
	var es []store.Entry
	_ = tk.Store.View(func(tx store.Tx) error {
		var err error
		es, err = tx.Entries(tk.eng.Record().Tick)
		return err
	})
	if n := len(es); n > 0 && endNote(es[n-1].Event) {
		return
	}
	for _, e := range es {
		if code != "" && e.Code == code {
			return // a step of this tick committed the code that ended it
		}
	}
	reason, subject := endCause(err)
	if err := tk.eng.NoteAbout(machine.NoteTickEnd, code, reason, subject, detail, tk.Now(), nil); err != nil {
		tk.Log.Warn().Msg("journal the tick's end: " + err.Error())
	}
}

// endNote reports whether a note event already tells why a tick ended.
func endNote(ev string) bool {
	return machine.IsStopNote(ev) || ev == machine.NoteBlocked || ev == machine.NoteTickEnd
}

// noteStop journals why the tick stops here for now (a temporary fault) as a note of event: the
// fault's own code, or none when it has none (the event then names it, as explain reads it), and
// its redacted words; then, when not empty, says what the next tick does. The note ends the
// tick's story (endNote): journalEnd adds nothing after it.
func (tk *tick) noteStop(event string, err error, started time.Time, then string) {
	tk.noteStopBecause(event, effects.ReasonOf(err), err, started, then)
}

// noteStopBecause is noteStop with the reason the tick itself knows (the effect's own is
// err's).
func (tk *tick) noteStopBecause(event string, reason vocab.Reason, err error, started time.Time, then string) {
	detail := err.Error()
	if then != "" {
		detail += " (" + then + ")"
	}
	_ = tk.eng.Note(event, stopCode(event, err), reason, detail, started, nil)
}

// stopCode is the code a stop note is journaled with: the fault's own, else BAO_UNAVAILABLE
// for OpenBao that could not answer (a login-failed note is always about OpenBao), else none.
func stopCode(event string, err error) vocab.Code {
	if c := effects.CodeOf(err); c != "" {
		return c
	}
	var e *effects.Error
	if event == machine.NoteLoginFailed || (errors.As(err, &e) && effects.IsTemporary(err) && strings.HasPrefix(e.Op, "bao")) {
		return vocab.BaoUnavailable
	}
	return ""
}

// endWords is the code and words a tick's ending is journaled with.
func endWords(err error) (vocab.Code, string) {
	msg := err.Error()
	var e *effects.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return vocab.TickDeadline, "the tick's deadline passed: it stopped at a step boundary; the next tick resumes — " + msg
	case errors.As(err, &e) && e.Op == "report":
		return vocab.ReportPending, "tenancy did not acknowledge the report (" + msg + "): it waits in the outbox; the next tick sends it again"
	case errors.As(err, &e) && e.Code != "":
		return e.Code, msg
	case errors.As(err, &e) && effects.IsTemporary(err) && strings.HasPrefix(e.Op, "bao"):
		return vocab.BaoUnavailable, msg
	case errors.As(err, &e) && effects.IsTemporary(err):
		return vocab.Temporary, msg
	case errors.Is(err, store.ErrLocked):
		return vocab.StateFileLocked, msg
	case local(err):
		return vocab.LocalFailure, msg
	}
	return "", msg
}

// endCause is the typed cause and the subject a tick-end entry keeps for err: what the trust
// check found and where (a *files.TrustError: the fix line is mended from the two), else the
// effect's reason.
func endCause(err error) (vocab.Reason, string) {
	var te *files.TrustError
	if errors.As(err, &te) {
		return te.Reason, te.Path
	}
	return effects.ReasonOf(err), ""
}

// traceEarly journals a tick that failed before the machine moved, as a tick of its own.
func (a *Agent) traceEarly(err error) {
	code, detail := endWords(err)
	if code == "" {
		code = vocab.LocalFailure
	}
	reason, subject := endCause(err)
	if terr := machine.RecordFailedTick(a.Store, a.Now, a.Cfg.EnvID, ExitCode(err), code, reason, subject, detail); terr != nil {
		a.Log.Warn().Msg("journal the failed tick: " + terr.Error())
	}
}

// envMismatchWords says the env mismatch once, naming both envs: config.yaml's and the one the
// token is pinned to (as lookup-self told it, else tenancy's own words).
func envMismatchWords(cfgEnv, tokenEnv string, err error) string {
	said := credential.Answer(err)
	if tokenEnv != "" && tokenEnv != cfgEnv {
		return fmt.Sprintf("config.yaml says %s, the token is pinned to %s (tenancy's %s)", cfgEnv, tokenEnv, said)
	}
	return fmt.Sprintf("config.yaml says %s, the token is pinned to another env (tenancy's %s)", cfgEnv, said)
}

// pastDeadline reports whether the tick's deadline (tick_timeout_s) has passed.
func pastDeadline(ctx context.Context) bool {
	return errors.Is(ctx.Err(), context.DeadlineExceeded)
}

// errTickTimeout is the error of a step boundary reached past the tick's deadline: temporary
// (exit 75), journaled by journalEnd as TICK_DEADLINE.
func (tk *tick) errTickTimeout() error {
	return &effects.Error{Op: "tick", Kind: effects.Temporary, Code: vocab.TickDeadline,
		Msg: fmt.Sprintf("the tick ran past tick_timeout_s (%s) and stopped at %s", tk.TickTimeout, tk.eng.State()),
		Err: context.DeadlineExceeded}
}

// CheckTrust checks the directories the agent writes into and the files it trusts that are not
// read as secrets (those are checked when read): state_dir, deploy_dir, releases/, resolved/
// (the resolved models hold the secrets' values), state.db and docker/config.json. The first
// that fails is returned as a *files.TrustError naming the fix.
func CheckTrust(cfg *config.Config) error {
	for _, d := range []string{cfg.StateDir, cfg.DeployDir, filepath.Join(cfg.DeployDir, "releases"), filepath.Join(cfg.DeployDir, model.ResolvedDirName)} {
		if err := files.CheckDir(d); err != nil {
			return err
		}
	}
	for _, f := range []string{cfg.StatePath(), filepath.Join(cfg.DockerConfigDir(), "config.json")} {
		if err := files.CheckFile(f); err != nil {
			return err
		}
	}
	return nil
}
