package explain

import (
	"fmt"
	"time"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/machine"
	"github.com/tikali/monky-deployd/store"
)

// recentTicks is how many of the newest ticks the verdict looks at for a pattern: repeated
// exit 75, a lease every tick, a token refused again and again.
const recentTicks = 10

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
}

// Verdict is what happens next and why: the words explain, status and the metrics share.
type Verdict struct {
	Next string
	// Why names the one thing between the box and tenancy's desired sha (nil: nothing is).
	Why *Why
	// Converged is true only when the box runs what tenancy wants and nothing is wrong.
	Converged bool
}

// Read gathers a verdict's input as of now.
func Read(tx store.Tx, now time.Time) (Input, error) {
	in := Input{Now: now, Entries: map[uint64][]store.Entry{}}
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

// Decide is the one place that says what happens next and why, for explain, status and the
// metrics alike.
func Decide(in Input) Verdict {
	why := explainWhy(in)
	base, converged := next(in)
	v := Verdict{Next: base, Why: why, Converged: converged && why == nil}
	if why != nil && converged {
		// the machine rests as if converged, but the box is not well: say so
		v.Next = "not converged: " + why.Code + " — " + why.short
	}
	if n := len(in.Outbox); n > 0 && (why == nil || (why.Code != machine.CodeReportPending && why.Code != machine.CodeOutboxStuck)) {
		v.Next += fmt.Sprintf("; %d report(s) wait in the outbox for the next tick", n)
	}
	return v
}

// Next says what happens next, in the words status and explain share.
func Next(in Input) string { return Decide(in).Next }

// next is the machine's own answer, and whether the machine rests converged.
func next(in Input) (string, bool) {
	rec := in.Rec
	switch stateOf(rec) {
	case string(machine.Refused):
		if rec.Refusal == nil {
			return "refused — a new desired sha starts over", false
		}
		if rec.Refusal.Code == machine.CodeDisk && rec.Refusal.NeedBytes > implausibleNeed {
			return "refused: DISK_INSUFFICIENT — the bundle declares " + machine.Size(rec.Refusal.NeedBytes) + ": a new desired sha with a true disk_need_bytes clears it", false
		}
		if rec.Refusal.Code == machine.CodeDisk {
			return "refused: DISK_INSUFFICIENT — measured again every tick; the apply goes on by itself once the space is there", false
		}
		return "refused: " + rec.Refusal.Code + " — " + clears(rec.Refusal.Code), false
	case string(machine.Failed):
		n := rec.TotalAttempts()
		code := ""
		if rec.Failure != nil {
			code = rec.Failure.Code + " "
		}
		if rec.Action == machine.ActionNone {
			return "unhealthy: " + code + "— checked again at the next tick", false
		}
		if rec.Parked {
			return fmt.Sprintf("parked after %d failed attempts: %s— `monky-deployd resume` retries", n, code), false
		}
		return fmt.Sprintf("retry %d of %d at %s", n+1, machine.AttemptLimit(rec), machine.Stamp(rec.NextRetryAt)), false
	case string(machine.Blocked):
		if rec.Block == nil {
			return "blocked — `monky-deployd resume`", false
		}
		if rec.Block.Code == machine.CodeEnvMismatch {
			return "blocked: AGENT_ENV_MISMATCH — every tick exits 78 without network until config.yaml changes or `monky-deployd resume`", false
		}
		return "blocked: " + rec.Block.Code + " — re-run the install kit: a new bootstrap.jwt unblocks (or `monky-deployd bootstrap --force`)", false
	case string(machine.Reported):
		if rec.LastReport != nil && rec.LastReport.Result == effects.ResultFailed {
			return "unhealthy — checked again at the next tick", false
		}
		if rec.Action == machine.ActionDown {
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

// newest is the newest tick and its entries.
func (in Input) newest() (store.TickSummary, []store.Entry, bool) {
	if len(in.Recent) == 0 {
		return store.TickSummary{}, nil, false
	}
	t := in.Recent[len(in.Recent)-1]
	return t, in.Entries[t.Tick], true
}
