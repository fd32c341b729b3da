// Package states holds the steps of the machine, one file each (the table in steps.go), and
// the tick that drives them: check in first, then resume the flight in progress or start the
// one tenancy asks for. Each step does its I/O through the effects interfaces and returns an
// Outcome; the machine.Engine is the only writer of state and journal. No step reads the wall
// clock: the Agent's Now is injected.
package states

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/rs/zerolog"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/effects/files"
	"github.com/tikali/monky-deployd/internal/bundle"
	"github.com/tikali/monky-deployd/internal/config"
	"github.com/tikali/monky-deployd/internal/vocab"
	"github.com/tikali/monky-deployd/machine"
	"github.com/tikali/monky-deployd/machine/explain"
	"github.com/tikali/monky-deployd/store"
)

// Effects are the agent's ways out of its process.
type Effects struct {
	Tenancy effects.Tenancy
	Bao     effects.Bao
	Compose effects.Compose
	Disk    effects.Disk
}

// Agent runs ticks for one box.
type Agent struct {
	Cfg     *config.Config
	Fx      Effects
	Store   store.Store
	Now     machine.Clock
	Sleep   func(ctx context.Context, d time.Duration) error
	Log     zerolog.Logger
	Host    string
	Version string
	// Prune adds, to the release pruning every successful apply does, the removal of the
	// images of the env's repositories that no kept release uses, and `docker image prune -f`.
	Prune bool
	// ContainerdRoots are measured with the docker data-root before a pull (docker 29 keeps
	// image layers in containerd's store, often on another filesystem).
	ContainerdRoots []string
	// MaxAttempts is how many failed applies of one sha are retried before the machine parks.
	MaxAttempts int
	// Retention bounds the journal.
	Retention store.Retention
	// Stop, when closed, ends the tick after the step in flight is committed (loop mode).
	Stop <-chan struct{}
	// TickTimeout is the whole tick's deadline (default: tick_timeout_s; negative: none).
	TickTimeout time.Duration
	// HealthPoll is how often the health wait polls `compose ps`.
	HealthPoll time.Duration
	// FS is where the agent's own files are written (token, grant, docker config, releases,
	// `current`); files.OS when nil. The bbolt state file is not among them.
	FS files.FS

	// Operator names who ran `resume` (uid and user), for the journal; found when empty.
	Operator string
}

// tick is one tick's working state, beside the Agent's configuration and seams: built by
// Tick (and by BootstrapCommand) over the engine it loaded, dropped when it ends, so no tick
// sees another's. The steps are its methods.
type tick struct {
	*Agent
	// diskFree is the free image storage the tick's last disk measure found (DISK_INSUFFICIENT
	// records it: explain tells a need only the config's headroom blocks).
	diskFree int64
	// Log is the Agent's logger with the tick's number, once it has one: it stands in for
	// Agent.Log in every method of the tick (loop mode runs many ticks on one Agent).
	Log zerolog.Logger
	// eng is the machine over the state file, as this tick loaded it.
	eng *machine.Engine
	// number is the tick's, once it began (0 before).
	number uint64
	// token is the bearer the tick holds ("" before ensureToken, or once it was dropped).
	token string
	// grantFresh: this process leased the kept grant, so no login with it can have happened
	grantFresh bool
	// tokenRecovered: this tick renamed a token left under its temp name into place; what the
	// state file says about the token may be about the one it replaced
	tokenRecovered bool
	bundle         *bundle.Bundle
	// failSubject is what the failure the step is about to commit is about (store.Failure.Subject):
	// set just before fail, taken by it
	failSubject string
	archives    []*os.File // the archive files the bundle is read from, closed at the tick's end
	action      string
	// gated are the containers the health gate passed on, and gatedWords its words for them.
	gated      []effects.Container
	gatedWords string
	// healWords say why a heal did not bring the release back; judged is the heartbeat's
	// judgement of the release ("2/2 services healthy"), for the closing line.
	healWords, judged string
	// revertLogs are the failed release's logs, read before a revert replaced its containers.
	revertLogs string
	// stepStarted is when the step in flight began: a failure's entry counts its whole wall
	// time, waits included.
	stepStarted time.Time
	// outboxEmpty: the outbox was empty when the tick read the state file and the tick has
	// enqueued nothing since (false: only the file knows).
	outboxEmpty bool
	// tail is the heartbeat's writes, committed with the tick's end in one transaction.
	tail func() error
	// said is what this tick's lines said at warning or error (log.go): the closing line
	// does not say it again.
	said []saidLine
	// verdict is the box's, read in the tick's end transaction (nil: the end did not commit).
	verdict *explain.Verdict
	// held is the person's hold that lasts this tick (hold.go), once holdChecked.
	held        *store.Hold
	holdChecked bool
	// listed is compose ps --all's listing the tick took before its check-in, and listErr why
	// there is none.
	listed  []effects.Container
	listErr error
	// listedFrom and listedBy bound when that listing was taken; before is the listing the
	// record kept from an earlier tick and beforeAt when it was taken (restarts reads them).
	listedFrom, listedBy time.Time
	before               []store.Container
	beforeAt             time.Time
}

// newTick is a tick over eng, logging as the Agent does until it has a number.
func (a *Agent) newTick(eng *machine.Engine) *tick {
	return &tick{Agent: a, Log: a.Log, eng: eng}
}

// fs is the agent's file seam: FS, or the real filesystem.
func (a *Agent) fs() files.FS {
	if a.FS == nil {
		return files.OS
	}
	return a.FS
}

// Defaults fills what a zero Agent lacks.
func (a *Agent) defaults() {
	if a.Now == nil {
		a.Now = time.Now
	}
	if a.Sleep == nil {
		a.Sleep = sleepCtx
	}
	if a.MaxAttempts == 0 {
		a.MaxAttempts = machine.MaxAttempts
	}
	if a.Retention.MaxTicks == 0 {
		a.Retention = store.DefaultRetention
	}
	if a.ContainerdRoots == nil {
		a.ContainerdRoots = []string{"/var/lib/containerd"}
	}
	if a.HealthPoll == 0 {
		a.HealthPoll = 2 * time.Second
	}
	if a.TickTimeout == 0 {
		a.TickTimeout = time.Duration(a.Cfg.TickTimeoutS) * time.Second
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Result is how a tick ended.
type Result struct {
	Exit int
	// Err is the failure that decided the exit code, nil on success.
	Err error
	// IntervalS is tenancy's checkin_interval_s, 0 when it gave none.
	IntervalS int
	// Tick is the tick's number, 0 when none began (another tick held the lock).
	Tick uint64
}

// ExitCode derives the exit code from an error: the one place this is decided.
func ExitCode(err error) int {
	if err == nil {
		return vocab.ExitOK
	}
	var stopped errStopped
	if errors.As(err, &stopped) {
		return vocab.ExitOK
	}
	// a reader holding the state file past the tick's wait never fails a tick, of any kind
	if errors.Is(err, store.ErrLocked) {
		return vocab.ExitTemporary
	}
	switch effects.KindOf(err) {
	case effects.Temporary, effects.RateLimited:
		return vocab.ExitTemporary
	case effects.EnvMismatch:
		return vocab.ExitEnvMismatch
	}
	return vocab.ExitFail
}

// errStopped ends a tick early on loop-mode shutdown, after the step in flight committed.
type errStopped struct{}

func (errStopped) Error() string { return "stopped" }

// parked is a tick that ended in a parked state (refused, failed, blocked): its kind
// decides the exit code (1, or 78 for an env mismatch).
func parked(kind effects.Kind, code vocab.Code, format string, args ...any) error {
	return &effects.Error{Op: "tick", Kind: kind, Code: code, Msg: fmt.Sprintf(format, args...)}
}

func (a *Agent) stopping() bool {
	if a.Stop == nil {
		return false
	}
	select {
	case <-a.Stop:
		return true
	default:
		return false
	}
}

// local reports whether err is the agent's own fault — the state file or a file it writes —
// rather than an answer from tenancy, OpenBao or docker. A local error ends the tick as it is
// (exit 1, nothing committed past it); it is never counted as the apply's failure.
func local(err error) bool {
	var e *effects.Error
	var r *bundle.Refusal
	return err != nil && !errors.As(err, &e) && !errors.As(err, &r)
}
