package machine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/looplab/fsm"

	"github.com/tikali/monky-deployd/internal/failpoint"

	"github.com/tikali/monky-deployd/internal/vocab"
	"github.com/tikali/monky-deployd/store"
)

// Clock is the injected time source.
type Clock func() time.Time

// Transition is what the Engine journals and logs for one committed change of state.
type Transition struct {
	Tick   uint64
	From   State
	To     State
	Event  string
	Code   vocab.Code
	Detail string
	Ms     int64
}

// Outcome is what a step decided: the event to fire, words for the journal, and any durable
// writes that must be committed together with the transition (outbox, lease budget, history).
type Outcome struct {
	Event  string
	Code   vocab.Code
	Reason vocab.Reason // the typed cause behind Code, kept in the entry
	Detail string
	// Update, when set, edits the record and writes more in the same transaction.
	Update func(rec *store.Record, tx store.Tx) error
}

// Engine owns the current state. Fire and Note are the only writers of state and journal.
type Engine struct {
	store store.Store
	now   Clock
	fsm   *fsm.FSM
	rec   store.Record
	// OnTransition, when set, is called after each commit (one log line per transition).
	OnTransition func(Transition)
	// OnNote, when set, is called after each journal note.
	OnNote func(e store.Entry)
	// pendingTick is the header of a tick begun but not yet written: it goes to disk with the
	// tick's first commit, so a tick costs no commit of its own.
	pendingTick *store.TickSummary
	// batch is the transaction of a Batch in progress: commits go into it (see Batch).
	batch *batchTx
}

// batchTx is one Batch: its transaction, the first write that failed in it, and what waits for
// its commit (log lines, failpoints).
type batchTx struct {
	tx    store.Tx
	err   error
	after []func()
}

// update runs fn in one store transaction, writing a pending tick header first. In a Batch it
// runs fn in the batch's transaction; a failed fn fails the whole batch.
func (e *Engine) update(fn func(tx store.Tx) error) error {
	if b := e.batch; b != nil {
		if b.err != nil {
			return b.err
		}
		if e.pendingTick != nil {
			if err := b.tx.PutTick(*e.pendingTick); err != nil {
				b.err = err
				return err
			}
			e.pendingTick = nil
		}
		if err := fn(b.tx); err != nil {
			b.err = err
			return err
		}
		return nil
	}
	err := e.store.Update(func(tx store.Tx) error {
		if e.pendingTick != nil {
			if err := tx.PutTick(*e.pendingTick); err != nil {
				return err
			}
		}
		return fn(tx)
	})
	if err == nil {
		e.pendingTick = nil
	}
	return err
}

// afterCommit runs fn once what was just written is committed: now, or at the end of a Batch.
func (e *Engine) afterCommit(fn func()) {
	if e.batch != nil {
		e.batch.after = append(e.batch.after, fn)
		return
	}
	fn()
}

// Batch runs fn with every commit the Engine makes in it (Fire, Note, Save, EndTick) folded
// into one store transaction: one open of the state file and one commit, so one fsync, for
// all of them. The transitions are logged once that commit is done. fn must make no network
// or docker call and must not use the store itself: the file is open and locked while it runs.
// When fn, one of its writes or the commit fails, nothing of fn is written and the Engine is
// back where it was before Batch.
func (e *Engine) Batch(fn func() error) error {
	if e.batch != nil {
		return fn()
	}
	rec, state, pending := cloneRecord(e.rec), e.State(), e.pendingTick
	b := &batchTx{}
	err := e.store.Update(func(tx store.Tx) error {
		b.tx = tx
		e.batch = b
		defer func() { e.batch = nil }()
		if err := fn(); err != nil {
			return err
		}
		return b.err
	})
	if err != nil {
		e.rec, e.pendingTick = rec, pending
		e.fsm.SetState(string(state))
		return err
	}
	for _, f := range b.after {
		f()
	}
	return nil
}

// Load reads the record, validates its state name and returns an Engine positioned there.
// A record from a fresh store starts at Idle.
func Load(st store.Store, now Clock) (*Engine, error) {
	return LoadWith(st, now, nil)
}

// LoadWith is Load that also runs also, when given, in the same read transaction: a tick's
// reads before its check-in take one open of the state file.
func LoadWith(st store.Store, now Clock, also func(tx store.Tx) error) (*Engine, error) {
	var rec store.Record
	if err := st.View(func(tx store.Tx) error {
		var err error
		if rec, err = tx.Record(); err != nil {
			return err
		}
		if also != nil {
			return also(tx)
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("load state: %w", err)
	}
	if rec.State == "" {
		rec.State = string(Idle)
	}
	s, err := Parse(rec.State)
	if err != nil {
		return nil, fmt.Errorf("load state: %w", err)
	}
	return &Engine{store: st, now: now, fsm: newFSM(s), rec: rec}, nil
}

// State is the current state.
func (e *Engine) State() State { return State(e.fsm.Current()) }

// Record returns a copy of the current record.
func (e *Engine) Record() store.Record { return cloneRecord(e.rec) }

// Fire validates ev against the table from the current state, then commits the new state,
// the outcome's writes and one journal entry in one transaction. started is when the step
// whose outcome this is began (for the entry's duration). Nothing changes when it fails.
func (e *Engine) Fire(o Outcome, started time.Time) error {
	from := e.State()
	if !e.fsm.Can(o.Event) {
		return fmt.Errorf("machine: event %q is not allowed in state %s", o.Event, from)
	}
	// The fsm is the validator only: it runs no callbacks and must never see a cancelled
	// context (a cancelled Event wedges it for good), hence WithoutCancel.
	if err := e.fsm.Event(context.WithoutCancel(context.Background()), o.Event); err != nil {
		var noTr fsm.NoTransitionError
		if !errors.As(err, &noTr) {
			return fmt.Errorf("machine: %s from %s: %w", o.Event, from, err)
		}
	}
	to := e.State()
	now := e.now()
	ms := now.Sub(started).Milliseconds()
	if ms < 0 {
		ms = 0
	}
	rec := cloneRecord(e.rec)
	rec.State = string(to)
	entry := store.Entry{Tick: rec.Tick, At: now, From: string(from), To: string(to), Event: o.Event, Ms: ms, Code: o.Code, Reason: o.Reason, Detail: o.Detail}
	failpoint.Hit("before:" + string(to))
	err := e.update(func(tx store.Tx) error {
		if o.Update != nil {
			if err := o.Update(&rec, tx); err != nil {
				return err
			}
		}
		if err := tx.PutRecord(rec); err != nil {
			return err
		}
		_, err := tx.Append(entry)
		return err
	})
	if err != nil {
		e.fsm.SetState(string(from))
		return fmt.Errorf("commit %s → %s: %w", from, to, err)
	}
	e.rec = rec
	e.afterCommit(func() {
		failpoint.Hit("after:" + string(to))
		if e.OnTransition != nil {
			e.OnTransition(Transition{Tick: rec.Tick, From: from, To: to, Event: o.Event, Code: o.Code, Detail: o.Detail, Ms: ms})
		}
	})
	return nil
}

// Note journals words without a change of state (a check-in that resumes a flight, a tick
// that waits for its backoff), committing update with it when given. reason is the typed
// cause behind code, kept in the entry beside it: a caller that knows one (the refusal's, the
// failure's, the error's — effects.ReasonOf) passes it, so that nothing downstream has to
// read the detail to tell causes apart; "" when the code says all.
func (e *Engine) Note(event string, code vocab.Code, reason vocab.Reason, detail string, started time.Time, update func(rec *store.Record, tx store.Tx) error) error {
	return e.NoteAbout(event, code, reason, "", detail, started, update)
}

// NoteAbout is Note of an entry about subject, the file or directory a fix line names
// (store.Entry.Subject).
func (e *Engine) NoteAbout(event string, code vocab.Code, reason vocab.Reason, subject, detail string, started time.Time, update func(rec *store.Record, tx store.Tx) error) error {
	now := e.now()
	ms := now.Sub(started).Milliseconds()
	if ms < 0 {
		ms = 0
	}
	rec := cloneRecord(e.rec)
	s := string(e.State())
	entry := store.Entry{Tick: rec.Tick, At: now, From: s, To: s, Event: event, Ms: ms, Code: code, Reason: reason, Subject: subject, Detail: detail}
	err := e.update(func(tx store.Tx) error {
		if update != nil {
			if err := update(&rec, tx); err != nil {
				return err
			}
		}
		if err := tx.PutRecord(rec); err != nil {
			return err
		}
		seq, err := tx.Append(entry)
		entry.Seq = seq
		return err
	})
	if err != nil {
		return fmt.Errorf("journal %s: %w", event, err)
	}
	e.rec = rec
	e.afterCommit(func() {
		if e.OnNote != nil {
			e.OnNote(entry)
		}
	})
	return nil
}

// Save commits record changes that are not a transition and need no journal entry
// (the container list, the token's expiry after a renew).
func (e *Engine) Save(update func(rec *store.Record, tx store.Tx) error) error {
	rec := cloneRecord(e.rec)
	if err := e.update(func(tx store.Tx) error {
		if err := update(&rec, tx); err != nil {
			return err
		}
		return tx.PutRecord(rec)
	}); err != nil {
		return fmt.Errorf("save state: %w", err)
	}
	e.rec = rec
	return nil
}

// Defer changes the record in memory; the change is written with the next commit of this
// tick (a transition, a note, or the tick's end). For facts a crash may lose, such as when the
// last check-in was: it saves a commit, and so an fsync, per tick.
func (e *Engine) Defer(update func(rec *store.Record)) {
	update(&e.rec)
}

// Restart positions the fsm at s without a transition: a tick that starts from Reported
// starts from Idle (the tick boundary is not a journaled step).
func (e *Engine) Restart(s State) {
	e.fsm.SetState(string(s))
}

func cloneRecord(r store.Record) store.Record {
	c := r
	if r.Attempts != nil {
		c.Attempts = make(map[string]int, len(r.Attempts))
		for k, v := range r.Attempts {
			c.Attempts[k] = v
		}
	}
	if r.Containers != nil {
		c.Containers = append([]store.Container(nil), r.Containers...)
	}
	c.Refusal = clonePtr(r.Refusal)
	c.Block = clonePtr(r.Block)
	c.Failure = clonePtr(r.Failure)
	c.LastReport = clonePtr(r.LastReport)
	return c
}

// clonePtr is a pointer to a copy of *p; nil for nil.
func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}
