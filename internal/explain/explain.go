// Package explain reads the state file and says, in words a support engineer reads at 3 a.m.,
// why the box is where it is: the journal of the last ticks (`explain`) and where the box
// stands now (`status`). It only reads: it never changes the state file, never dials out.
package explain

import (
	"fmt"
	"time"

	"github.com/tikali/monky-deployd/machine"
	"github.com/tikali/monky-deployd/store"
)

// Schema is the version of the --json documents; it changes only when a field's meaning does.
const Schema = 1

// LeaseLimit and LeaseWindow are tenancy's budget, as the machine keeps it.
const (
	LeaseLimit  = machine.LeaseLimit
	LeaseWindow = machine.LeaseWindow
)

// Transition is one journal entry as explain shows it.
type Transition struct {
	From   string    `json:"from"`
	To     string    `json:"to"`
	Event  string    `json:"event"`
	At     time.Time `json:"at"`
	Ms     int64     `json:"ms"`
	Code   string    `json:"code,omitempty"`
	Detail string    `json:"detail"`
}

// Tick is one tick of the journal.
type Tick struct {
	Tick        uint64       `json:"tick"`
	StartedAt   time.Time    `json:"started_at"`
	Exit        *int         `json:"exit"`
	Action      string       `json:"action"`
	DesiredSha  string       `json:"desired_sha"`
	AppliedSha  string       `json:"applied_sha"`
	Folded      uint64       `json:"folded,omitempty"`
	LastAt      *time.Time   `json:"last_at,omitempty"`
	Transitions []Transition `json:"transitions"`
}

// Doc is `explain --json`.
type Doc struct {
	Schema int    `json:"schema"`
	EnvID  string `json:"env_id"`
	State  string `json:"state"`
	Next   string `json:"next"`
	// Why names the one thing standing between the box and tenancy's desired sha; null when
	// nothing does.
	Why   *Why   `json:"why"`
	Ticks []Tick `json:"ticks"`
}

// Options select the ticks.
type Options struct {
	N     int       // the newest N ticks (0: 20)
	Since time.Time // and none that started before (zero: no bound)
	Now   time.Time
}

// Build reads the journal and the record in one read transaction.
func Build(st store.Store, o Options) (Doc, error) {
	if o.N <= 0 {
		o.N = 20
	}
	var d Doc
	err := st.View(func(tx store.Tx) error {
		rec, err := tx.Record()
		if err != nil {
			return err
		}
		sums, err := tx.Ticks(o.N)
		if err != nil {
			return err
		}
		for _, s := range sums {
			if !o.Since.IsZero() && s.StartedAt.Before(o.Since) && (s.LastAt.IsZero() || s.LastAt.Before(o.Since)) {
				continue
			}
			es, err := tx.Entries(s.Tick)
			if err != nil {
				return err
			}
			t := Tick{Tick: s.Tick, StartedAt: s.StartedAt, Exit: s.Exit, Action: s.Action, DesiredSha: s.DesiredSha, AppliedSha: s.AppliedSha, Folded: s.Folded, Transitions: []Transition{}}
			if !s.LastAt.IsZero() {
				la := s.LastAt
				t.LastAt = &la
			}
			for _, e := range es {
				t.Transitions = append(t.Transitions, Transition{From: e.From, To: e.To, Event: e.Event, At: e.At, Ms: e.Ms, Code: e.Code, Detail: e.Detail})
			}
			d.Ticks = append(d.Ticks, t)
		}
		used, frees, err := machine.LeaseBudget(tx, o.Now)
		if err != nil {
			return err
		}
		q, err := tx.Outbox()
		if err != nil {
			return err
		}
		d.EnvID = rec.EnvID
		d.State = stateOf(rec)
		d.Next = Next(rec, used, frees, len(q), o.Now)
		in := whyInput{rec: rec, used: used, frees: frees, outbox: len(q), now: o.Now}
		newest, err := tx.Ticks(1)
		if err != nil {
			return err
		}
		if len(newest) == 1 {
			in.lastSum = newest[0]
			if in.last, err = tx.Entries(newest[0].Tick); err != nil {
				return err
			}
		}
		d.Why = explainWhy(in)
		return nil
	})
	if d.Ticks == nil {
		d.Ticks = []Tick{}
	}
	if d.Why != nil && d.Why.Tick == 0 {
		for _, t := range d.Ticks {
			for _, tr := range t.Transitions {
				if tr.Code == d.Why.Code && tr.From != tr.To {
					d.Why.Tick = t.Tick
				}
			}
		}
	}
	d.Schema = Schema
	return d, err
}

func stateOf(rec store.Record) string {
	if rec.State == "" {
		return "Idle"
	}
	return rec.State
}

func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	if sha == "" {
		return "(none)"
	}
	return sha
}

func clock(t time.Time) string { return t.UTC().Format("15:04") }

// Next says what happens next, in the words status and explain share.
func Next(rec store.Record, leasesUsed int, budgetFrees time.Time, outbox int, now time.Time) string {
	s := next(rec, leasesUsed, budgetFrees, now)
	if outbox > 0 {
		s += fmt.Sprintf("; %d report(s) wait in the outbox for the next tick", outbox)
	}
	return s
}

func next(rec store.Record, used int, frees time.Time, now time.Time) string {
	switch stateOf(rec) {
	case "Refused":
		if rec.Refusal == nil {
			return "refused — waiting for a new desired sha or `resume`"
		}
		if rec.Refusal.Code == "DISK_INSUFFICIENT" {
			return "refused: DISK_INSUFFICIENT — measured again every tick; the apply goes on by itself once the space is there"
		}
		return "refused: " + rec.Refusal.Code + " — waiting for a new desired sha or `resume`"
	case "Failed":
		n := rec.TotalAttempts()
		code := ""
		if rec.Failure != nil {
			code = rec.Failure.Code + " "
		}
		if rec.Action == "none" {
			return "unhealthy " + code + "— checked again at the next tick"
		}
		if rec.Parked {
			return fmt.Sprintf("parked after %d failed attempts: %s— `monky-deployd resume` retries", n, code)
		}
		return fmt.Sprintf("retry %d of %d at %s", n+1, machine.MaxAttempts, clock(rec.NextRetryAt))
	case "Blocked":
		if rec.Block == nil {
			return "blocked — `monky-deployd resume`"
		}
		if rec.Block.Code == "AGENT_ENV_MISMATCH" {
			return "blocked: AGENT_ENV_MISMATCH — every tick exits 78 without network until config.yaml changes or `monky-deployd resume`"
		}
		return "blocked: " + rec.Block.Code + " — re-run the install kit: a new bootstrap.jwt unblocks (or `monky-deployd resume`)"
	case "Reported":
		if rec.LastReport != nil && rec.LastReport.Result == "failed" {
			return "unhealthy — checked again at the next tick"
		}
		if rec.Action == "down" {
			return "retired: nothing runs"
		}
		if rec.LastExit == 75 {
			return "converged at the last check-in tenancy answered; the last tick could not reach it (exit 75) — the next tick retries"
		}
		return "converged"
	case "Idle":
		if rec.Tick == 0 || rec.LastCheckinAt.IsZero() {
			return "waiting for the first check-in"
		}
		return "the next tick checks in and starts over"
	}
	// in flight
	if used >= LeaseLimit && now.Before(frees) {
		return fmt.Sprintf("lease budget %d/%d until %s", used, LeaseLimit, clock(frees))
	}
	if now.Before(rec.LeaseRetryAfter) {
		return "tenancy asked to wait: no lease before " + clock(rec.LeaseRetryAfter)
	}
	return "resuming at " + stateOf(rec) + " at the next tick"
}
