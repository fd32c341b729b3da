// Package explain reads the state file and says, in words a support engineer reads at 3 a.m.,
// why the box is where it is: the journal of the last ticks (`explain`) and where the box
// stands now (`status`). It only reads: it never changes the state file, never dials out.
//
// It is the read model of the state machine, so it sits in machine/, above machine and store
// (whose records and words it reads) and below states (which journals with its words) and cmd
// (which prints it): a folder above it would import it back, a folder below could not hold it.
package explain

import (
	"time"

	"github.com/tikali/monky-deployd/internal/vocab"
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
	From  string     `json:"from"`
	To    string     `json:"to"`
	Event string     `json:"event"`
	At    time.Time  `json:"at"`
	Ms    int64      `json:"ms"`
	Code  vocab.Code `json:"code,omitempty"`
	// Reason is the typed cause behind Code (docs/JOURNAL.md, "Reasons").
	Reason vocab.Reason `json:"reason,omitempty"`
	Detail string       `json:"detail"`
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
	// Verdict is converged, working or needs_person: the one answer every surface gives.
	Verdict string `json:"verdict"`
	// Codes are every active code, Why's first.
	Codes []string `json:"codes"`
	// Why names the first thing standing between the box and tenancy's desired sha; null when
	// nothing does. Also are the other active codes' why blocks.
	Why  *Why  `json:"why"`
	Also []Why `json:"also,omitempty"`
	// AsOf is set when a copy is read: the file's newest tick, which stands for "now".
	AsOf *time.Time `json:"as_of,omitempty"`
	// Since is the --since window, when one was given.
	Since string `json:"since,omitempty"`
	Ticks []Tick `json:"ticks"`
	// MovedAside is the corrupt state file this one replaced (where the copy is), nil when none.
	MovedAside *store.MovedAside `json:"state_file_moved_aside,omitempty"`
	// Salvaged is set when the file is corrupt and was read as far as it could be (through an
	// older meta page, or its sound pages only): what follows lacks what it lost.
	Salvaged *store.Salvaged `json:"salvaged,omitempty"`
	// sent: AsOf is the time given (Options.AsOf), not the copy's newest tick.
	sent bool
}

// Options select the ticks.
type Options struct {
	N int // the newest N ticks (0: 20)
	// Since keeps only the ticks of the last Since (0: no bound), measured back from Now — or,
	// on a copy, from the file's newest tick.
	Since time.Duration
	Now   time.Time
	// Copy reads the file as a copy a box sent in: "now" is the file's newest tick, so the
	// budget, the retry times and --since mean what they meant on the box.
	Copy bool
	// AsOf, on a copy, reads it as of this time instead of its newest tick (when the box sent
	// it): a box whose timer stopped reads stale.
	AsOf time.Time
	// Limits are the box's stuck_after_s and stale_after_s, the lock, and its paths.
	Limits Limits
}

// Build reads the journal and the record in one read transaction.
func Build(st store.Store, o Options) (Doc, error) {
	if o.N <= 0 {
		o.N = 20
	}
	var d Doc
	err := st.View(func(tx store.Tx) error {
		now, err := d.readAsOf(tx, o)
		if err != nil {
			return err
		}
		var since time.Time
		if o.Since > 0 {
			since = now.Add(-o.Since)
			d.Since = o.Since.String()
		}
		ticks, err := readTicks(tx, o.N, since)
		if err != nil {
			return err
		}
		d.Ticks = ticks
		in, err := ReadWith(tx, now, o.Limits)
		if err != nil {
			return err
		}
		v := Decide(in)
		d.EnvID = in.Rec.EnvID
		d.State = stateOf(in.Rec)
		d.Next, d.Why, d.Also, d.Verdict, d.Codes = v.Next, v.Why, v.Also, v.Verdict, v.Codes
		return nil
	})
	if d.Ticks == nil {
		d.Ticks = []Tick{}
	}
	if d.Codes == nil {
		d.Codes = []string{}
	}
	if err == nil {
		d.MovedAside, err = movedAside(st)
	}
	d.Schema = Schema
	return d, err
}

// readAsOf is the time the explanation is of: now, or for a copy its newest tick (or the
// --as-of time it was sent), which d then says.
func (d *Doc) readAsOf(tx store.Tx, o Options) (time.Time, error) {
	now := o.Now
	if o.Copy {
		at, err := newestAt(tx)
		if err != nil {
			return now, err
		}
		if !o.AsOf.IsZero() {
			at, d.sent = o.AsOf, true
		}
		if !at.IsZero() {
			now = at
			u := at.UTC()
			d.AsOf = &u
		}
	}
	return now, nil
}

// readTicks reads the last n ticks of tx and their entries, leaving out those that ended
// before since (zero: none).
func readTicks(tx store.Tx, n int, since time.Time) ([]Tick, error) {
	sums, err := tx.Ticks(n)
	if err != nil {
		return nil, err
	}
	var ticks []Tick
	for _, s := range sums {
		if !since.IsZero() && s.StartedAt.Before(since) && (s.LastAt.IsZero() || s.LastAt.Before(since)) {
			continue
		}
		es, err := tx.Entries(s.Tick)
		if err != nil {
			return nil, err
		}
		t := Tick{Tick: s.Tick, StartedAt: s.StartedAt, Exit: s.Exit, Action: s.Action, DesiredSha: s.DesiredSha, AppliedSha: s.AppliedSha, Folded: s.Folded, Transitions: []Transition{}}
		if !s.LastAt.IsZero() {
			la := s.LastAt
			t.LastAt = &la
		}
		for _, e := range es {
			t.Transitions = append(t.Transitions, Transition{From: e.From, To: e.To, Event: e.Event, At: e.At, Ms: e.Ms, Code: e.Code, Reason: e.Reason, Detail: e.Detail})
		}
		ticks = append(ticks, t)
	}
	return ticks, nil
}

// newestAt is when the file's newest tick last did something: its last folded tick, its end,
// or its start (zero for a file no tick has written).
func newestAt(tx store.Tx) (time.Time, error) {
	ts, err := tx.Ticks(1)
	if err != nil || len(ts) == 0 {
		return time.Time{}, err
	}
	t := ts[0]
	at := t.StartedAt
	for _, x := range []time.Time{t.EndedAt, t.LastAt} {
		if x.After(at) {
			at = x
		}
	}
	return at, nil
}

// AsOf is the time a copy of the state file is read as of: its newest tick (zero when none).
func AsOf(st store.Store) (time.Time, error) {
	var at time.Time
	err := st.View(func(tx store.Tx) error {
		var err error
		at, err = newestAt(tx)
		return err
	})
	return at, err
}

// movedAside is the corrupt state file st replaced, when st knows (a Bolt file, an export).
func movedAside(st store.Store) (*store.MovedAside, error) {
	if m, ok := st.(interface {
		MovedAside() (*store.MovedAside, error)
	}); ok {
		return m.MovedAside()
	}
	return nil, nil
}

func stateOf(rec store.Record) string {
	if rec.State == "" {
		return string(machine.Idle)
	}
	return rec.State
}
