package explain

import (
	"fmt"
	"slices"
	"time"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/internal/vocab"
	"github.com/tikali/monky-deployd/machine"
	"github.com/tikali/monky-deployd/store"
)

// recentTicks is how many of the newest ticks the verdict looks at for a pattern: repeated
// exit 75, a lease every tick, a token refused again and again.
const recentTicks = 10

// The three verdicts (docs/OPERATIONS.md, "The one verdict").
const (
	// Converged: the box runs what tenancy wants and nothing is wrong.
	Converged = "converged"
	// Working: not converged, but it clears by itself (in flight, a backoff before the park,
	// a temporary fault younger than stuck_after_s, the lease budget refilling).
	Working = "working"
	// NeedsPerson: it will not clear without a person.
	NeedsPerson = "needs_person"
)

// Defaults of the config's stuck_after_s and stale_after_s.
const (
	DefaultStuckAfter = 1800 * time.Second
	DefaultStaleAfter = 300 * time.Second
)

// Limits turn "working on it" into "needs a person": a temporary fault older than StuckAfter,
// a last tick older than StaleAfter (unless a tick holds the lock now).
type Limits struct {
	StuckAfter time.Duration // 0: DefaultStuckAfter
	StaleAfter time.Duration // 0: DefaultStaleAfter
	// TickRunning: a tick holds the lock now, so the box is not stale whatever its last tick.
	TickRunning bool
	// Paths are the box's own paths the fix lines name (zero: placeholders, as on a copy).
	Paths Paths
	// Unwritable is what keeps the agent from writing its own files now (Unwritable's words),
	// "" when nothing does or on a copy.
	Unwritable string
}

// orBox fills what l leaves unset (a copy read without its config) from the record's box: the
// values and paths that decided its newest tick.
func (l Limits) orBox(b store.Box) Limits {
	if l.StuckAfter == 0 {
		l.StuckAfter = time.Duration(b.StuckAfterS) * time.Second
	}
	if l.StaleAfter == 0 {
		l.StaleAfter = time.Duration(b.StaleAfterS) * time.Second
	}
	p := &l.Paths
	for _, f := range []struct {
		dst *string
		src string
	}{
		{&p.StateDir, b.StateDir}, {&p.DeployDir, b.DeployDir}, {&p.Config, b.Config},
		{&p.BootstrapPath, b.BootstrapPath}, {&p.BaoCAFile, b.BaoCAFile}, {&p.BaoAddr, b.BaoAddr},
		{&p.Transport, b.Transport}, {&p.Identity, b.Identity},
	} {
		if *f.dst == "" {
			*f.dst = f.src
		}
	}
	return l
}

func (l Limits) stuckAfter() time.Duration {
	if l.StuckAfter > 0 {
		return l.StuckAfter
	}
	return DefaultStuckAfter
}

func (l Limits) staleAfter() time.Duration {
	if l.StaleAfter > 0 {
		return l.StaleAfter
	}
	return DefaultStaleAfter
}

// Paths are the box's own paths, from its config, that fix lines name. Empty fields are filled
// from the record (store.Box, what decided the newest tick), else the config's defaults (a copy
// an older agent wrote).
type Paths struct {
	StateDir, DeployDir, Config, BootstrapPath, BaoCAFile, BaoAddr string
	// Transport and Identity are the config's transport and identity file.
	Transport, Identity string
}

// Input is everything a verdict is built from, read in one transaction.
type Input struct {
	Rec    store.Record
	Used   int       // leases asked in the budget's window
	Frees  time.Time // when the oldest of them leaves it
	Leases []store.LeaseEvent
	Outbox []store.QueuedReport
	// Recent are the newest ticks, oldest first, and Entries their journal entries.
	Recent  []store.TickSummary
	Entries map[uint64][]store.Entry
	Now     time.Time
	Limits  Limits
}

// Verdict is what happens next and why: the one answer explain, status, the metrics, the log
// and the report share.
type Verdict struct {
	Next string
	// Why is the first thing between the box and tenancy's desired sha (nil: nothing is).
	Why *Why
	// Also are the other codes active beside Why's (a spent lease budget, a dying token…).
	Also []Why
	// Codes are every active code, Why's first.
	Codes []string
	// Verdict is Converged, Working or NeedsPerson.
	Verdict string
	// Converged is true only when the box runs what tenancy wants and nothing is wrong.
	Converged bool
}

// NeedsPerson reports whether the box needs a person: status exits 1.
func (v Verdict) NeedsPerson() bool { return v.Verdict == NeedsPerson }

// Whys are every active why, Why's first.
func (v Verdict) Whys() []Why {
	if v.Why == nil {
		return nil
	}
	return append([]Why{*v.Why}, v.Also...)
}

// Words is the verdict as status and explain print it.
func (v Verdict) Words() string { return VerdictWords(v.Verdict) }

// VerdictWords is a verdict in words.
func VerdictWords(verdict string) string {
	switch verdict {
	case Converged:
		return "converged"
	case Working:
		return "working on it"
	case NeedsPerson:
		return "needs a person"
	}
	return verdict
}

// ReadWith gathers a verdict's input as of now.
func ReadWith(tx store.Tx, now time.Time, lim Limits) (Input, error) {
	in := Input{Now: now, Entries: map[uint64][]store.Entry{}, Limits: lim}
	var err error
	if in.Rec, err = tx.Record(); err != nil {
		return in, err
	}
	if in.Used, in.Frees, err = machine.LeaseBudget(tx, now); err != nil {
		return in, err
	}
	if in.Leases, err = tx.Leases(now.Add(-machine.LeaseWindow)); err != nil {
		return in, err
	}
	if in.Outbox, err = tx.Outbox(); err != nil {
		return in, err
	}
	if in.Recent, err = tx.Ticks(recentTicks); err != nil {
		return in, err
	}
	for _, t := range in.Recent {
		if in.Entries[t.Tick], err = tx.Entries(t.Tick); err != nil {
			return in, err
		}
	}
	return in, nil
}

// Decide is the one place that says what happens next, why, and whether the box is converged,
// working on it or needs a person, for explain, status, the metrics, the log and the report.
func Decide(in Input) Verdict {
	in.Limits = in.Limits.orBox(in.Rec.Box) // a copy answers with the values that decided its newest tick
	whys := allWhys(in)
	base, converged := next(in)
	v := Verdict{Next: base, Converged: converged && len(whys) == 0}
	if len(whys) > 0 {
		v.Why = whys[0]
		for _, w := range whys[1:] {
			v.Also = append(v.Also, *w)
		}
		for _, w := range whys {
			v.Codes = append(v.Codes, string(w.Code))
		}
	}
	why := v.Why
	if why != nil && (converged || why.Code == vocab.TicksStopped) {
		// the machine rests as if converged, but the box is not well: say so
		v.Next = "not converged: " + string(why.Code) + " — " + why.short
	}
	if n := len(in.Outbox); n > 0 && !slices.Contains(v.Codes, string(vocab.ReportPending)) && !slices.Contains(v.Codes, string(vocab.OutboxStuck)) {
		v.Next += fmt.Sprintf("; %d report(s) wait in the outbox for the next tick", n)
	}
	in.finish(&v) // fix.go: every line true of the record and runnable as printed
	v.Verdict = in.verdict(whys, v.Converged)
	for _, w := range whys {
		w.Verdict = v.Verdict
	}
	if v.Why != nil {
		v.Why.Verdict = v.Verdict
	}
	for i := range v.Also {
		v.Also[i].Verdict = v.Verdict
	}
	return v
}

// verdict classes the box: converged, working on it (clears by itself), or needs a person.
func (in Input) verdict(whys []*Why, converged bool) string {
	if converged {
		return Converged
	}
	rec := in.Rec
	switch machine.State(stateOf(rec)) {
	case machine.Refused, machine.Blocked:
		return NeedsPerson
	case machine.Failed:
		if rec.Parked || rec.Action == vocab.ActionNone {
			return NeedsPerson
		}
	}
	for _, w := range whys {
		if w.person {
			return NeedsPerson
		}
	}
	// a tick that ended exit 1 or 78 outside a backoff ends the same way until someone acts
	if t, _, ok := in.newest(); ok && t.Exit != nil && (*t.Exit == vocab.ExitFail || *t.Exit == vocab.ExitEnvMismatch) &&
		machine.State(stateOf(rec)) != machine.Failed {
		return NeedsPerson
	}
	return Working
}

// next is the machine's own answer, and whether the machine rests converged.
func next(in Input) (string, bool) {
	rec := in.Rec
	switch stateOf(rec) {
	case string(machine.Refused):
		return refusedNext(rec), false
	case string(machine.Failed):
		return failedNext(rec), false
	case string(machine.Blocked):
		if rec.Block == nil {
			return "blocked — `monky-deployd resume`", false
		}
		if rec.Block.Code == vocab.AgentEnvMismatch {
			return "blocked: AGENT_ENV_MISMATCH — every tick exits 78 without network until config.yaml changes or `monky-deployd resume`", false
		}
		return "blocked: " + string(rec.Block.Code) + " — re-run the install kit: a new bootstrap.jwt unblocks (or `monky-deployd bootstrap --force`)", false
	case string(machine.Reported):
		if rec.LastReport != nil && rec.LastReport.Result == effects.ResultFailed {
			return "not converged: UNHEALTHY — a service is not running or not healthy; the next heartbeat heals a service that is down (compose up of the applied release, at most heal_budget times an hour, unless heal: false); one running unhealthy or restarting is reported only", false
		}
		if rec.Action == vocab.ActionDown {
			return "retired: nothing runs", true
		}
		return "converged", true
	case string(machine.Idle):
		if rec.Tick == 0 || rec.LastCheckinAt.IsZero() {
			return "waiting for the first check-in", false
		}
		return "the next tick checks in and starts over", true
	}
	// in flight
	if in.Used >= machine.LeaseLimit && in.Now.Before(in.Frees) {
		return fmt.Sprintf("lease budget %d/%d until %s", in.Used, machine.LeaseLimit, machine.Stamp(in.Frees)), false
	}
	if in.Now.Before(rec.LeaseRetryAfter) {
		return "tenancy asked to wait: no lease before " + machine.Stamp(rec.LeaseRetryAfter), false
	}
	return "resuming at " + stateOf(rec) + " at the next tick", false
}

// refusedNext is what comes next for a refused sha.
func refusedNext(rec store.Record) string {
	if rec.Refusal == nil {
		return "refused — a new desired sha starts over"
	}
	if rec.Refusal.Code == vocab.DiskInsufficient && rec.Refusal.NeedBytes > implausibleNeed {
		return "refused: DISK_INSUFFICIENT — the bundle declares " + machine.Size(rec.Refusal.NeedBytes) + ": a new desired sha with a true disk_need_bytes clears it"
	}
	if rec.Refusal.Code == vocab.DiskInsufficient {
		return "refused: DISK_INSUFFICIENT — measured again every tick; the apply goes on by itself once the space is there"
	}
	if dockerRefusal(rec.Refusal.Code) {
		return "refused: " + string(rec.Refusal.Code) + " — checked again every tick, before any lease; the apply goes on by itself once docker compose can run"
	}
	return "refused: " + string(rec.Refusal.Code) + " — " + clears(rec.Refusal.Code)
}

// dockerRefusal: an apply refused before its lease because compose cannot run on this box (the
// docker CLI, compose v2, docker's socket); the agent checks again at every tick.
func dockerRefusal(code vocab.Code) bool {
	return code == vocab.DockerNotFound || code == vocab.DockerGroupMissing
}

// failedNext is what comes next for a failed apply or an unhealthy heartbeat.
func failedNext(rec store.Record) string {
	n := rec.TotalAttempts()
	code := ""
	if rec.Failure != nil {
		code = string(rec.Failure.Code) + " "
	}
	if rec.Action == vocab.ActionNone && heartbeatCode(rec) == vocab.ReleaseChanged {
		return "not converged: RELEASE_CHANGED — the release on disk is no longer what was verified; checked again at the next tick, no compose call runs on it"
	}
	if rec.Action == vocab.ActionNone {
		return "not converged: " + code + "— a service is not running or not healthy; the next heartbeat heals a service that is down (compose up of the applied release, at most heal_budget times an hour, unless heal: false); one running unhealthy or restarting is reported only"
	}
	if f := rec.Failure; rec.Parked && f != nil && f.Reverted && f.NotServing != "" {
		return fmt.Sprintf("reverted to %s after %s failed: %s— %s is not serving now (%s: %s); `monky-deployd resume` tries %s again", machine.ShortSha(f.RevertTo), machine.ShortSha(f.Sha), code, machine.ShortSha(f.RevertTo), f.NotServingCode, f.NotServing, machine.ShortSha(f.Sha))
	}
	if f := rec.Failure; rec.Parked && f != nil && f.Reverted {
		return fmt.Sprintf("reverted to %s after %s failed: %s— %s serves; `monky-deployd resume` tries %s again", machine.ShortSha(f.RevertTo), machine.ShortSha(f.Sha), code, machine.ShortSha(f.RevertTo), machine.ShortSha(f.Sha))
	}
	if rec.Parked {
		return fmt.Sprintf("parked after %d failed attempts: %s— `monky-deployd resume` retries", n, code)
	}
	return fmt.Sprintf("retry %d of %d at %s", n+1, machine.AttemptLimit(rec), machine.Stamp(rec.NextRetryAt))
}

// newest is the newest tick and its entries.
func (in Input) newest() (store.TickSummary, []store.Entry, bool) {
	if len(in.Recent) == 0 {
		return store.TickSummary{}, nil, false
	}
	t := in.Recent[len(in.Recent)-1]
	return t, in.Entries[t.Tick], true
}
