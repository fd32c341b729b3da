package explain

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/tikali/monky-deployd/store"
)

// Line is one line of `explain --ndjson`. Type says which field is set:
//
//	header   the export: schema, env_id, exported_at, the box's verdict and its codes as
//	         explain decides them at exported_at, state_file_moved_aside when the file
//	         replaced a corrupt one
//	record   the machine's record (no secret: the store never holds one)
//	tick     a tick header, followed by its entries
//	entry    one journal entry
//	lease    one lease asked in the budget's window
//	outbox   one report waiting for tenancy (its meta and attempts; not its body)
//	applied  one sha of the applied history
type Line struct {
	Type       string     `json:"type"`
	Schema     int        `json:"schema,omitempty"`
	EnvID      string     `json:"env_id,omitempty"`
	ExportedAt *time.Time `json:"exported_at,omitempty"`
	// Verdict and Codes (on the header) are explain's answer for the box as exported: the
	// same verdict every other surface gives.
	Verdict string   `json:"verdict,omitempty"`
	Codes   []string `json:"codes,omitempty"`
	// MovedAside (on the header) is the corrupt state file this one replaced.
	MovedAside *store.MovedAside   `json:"state_file_moved_aside,omitempty"`
	Record     *store.Record       `json:"record,omitempty"`
	Tick       *store.TickSummary  `json:"tick,omitempty"`
	Entry      *store.Entry        `json:"entry,omitempty"`
	Lease      *store.LeaseEvent   `json:"lease,omitempty"`
	Outbox     *store.QueuedReport `json:"outbox,omitempty"`
	Applied    *store.Applied      `json:"applied,omitempty"`
}

// WriteNDJSON streams the whole state file, one JSON object per line: a header, the record,
// each tick header followed by its entries (oldest first), the lease window, the outbox and
// the applied history. ReadNDJSON turns it back into a store that explains the same.
func WriteNDJSON(w io.Writer, st store.Store, now time.Time) error {
	return WriteNDJSONWith(w, st, Options{Now: now})
}

// WriteNDJSONWith is WriteNDJSON with explain's options (the box's limits, a copy's as-of):
// the header's verdict is the one `explain` gives with them. The export is stamped o.Now.
func WriteNDJSONWith(w io.Writer, st store.Store, o Options) error {
	now := o.Now
	// a file explain cannot decide is still exported, without a verdict
	doc, _ := Build(st, o)
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	moved, err := movedAside(st)
	if err != nil {
		return fmt.Errorf("export journal: %w", err)
	}
	err = st.View(func(tx store.Tx) error {
		rec, err := tx.Record()
		if err != nil {
			return err
		}
		at := now.UTC()
		if err := enc.Encode(Line{Type: "header", Schema: Schema, EnvID: rec.EnvID, ExportedAt: &at, Verdict: doc.Verdict, Codes: doc.Codes, MovedAside: moved}); err != nil {
			return err
		}
		if err := enc.Encode(Line{Type: "record", Record: &rec}); err != nil {
			return err
		}
		if err := encodeTicks(enc, tx); err != nil {
			return err
		}
		return encodeTables(enc, tx)
	})
	if err != nil {
		return fmt.Errorf("export journal: %w", err)
	}
	return bw.Flush()
}

// encodeTicks writes every tick of tx and its entries, a line each.
func encodeTicks(enc *json.Encoder, tx store.Tx) error {
	ticks, err := tx.Ticks(0)
	if err != nil {
		return err
	}
	for i := range ticks {
		if err := enc.Encode(Line{Type: "tick", Tick: &ticks[i]}); err != nil {
			return err
		}
		es, err := tx.Entries(ticks[i].Tick)
		if err != nil {
			return err
		}
		for j := range es {
			if err := enc.Encode(Line{Type: "entry", Entry: &es[j]}); err != nil {
				return err
			}
		}
	}
	return nil
}

// encodeTables writes tx's lease budget, outbox (without the reports' bodies) and applied
// history, a line each.
func encodeTables(enc *json.Encoder, tx store.Tx) error {
	leases, err := tx.Leases(time.Unix(0, 0))
	if err != nil {
		return err
	}
	for i := range leases {
		if err := enc.Encode(Line{Type: "lease", Lease: &leases[i]}); err != nil {
			return err
		}
	}
	q, err := tx.Outbox()
	if err != nil {
		return err
	}
	for i := range q {
		meta := store.QueuedReport{ID: q[i].ID, Queued: q[i].Queued, Attempts: q[i].Attempts, Meta: q[i].Meta}
		if err := enc.Encode(Line{Type: "outbox", Outbox: &meta}); err != nil {
			return err
		}
	}
	hist, err := tx.AppliedHistory()
	if err != nil {
		return err
	}
	for i := range hist {
		if err := enc.Encode(Line{Type: "applied", Applied: &hist[i]}); err != nil {
			return err
		}
	}
	return nil
}

// Export is an export read back: an in-memory store, and the corrupt state file the exported
// one replaced (status and explain name it as they do on the box).
type Export struct {
	*store.Memory
	moved *store.MovedAside
}

// MovedAside is the corrupt state file the exported one replaced, nil when none.
func (x *Export) MovedAside() (*store.MovedAside, error) { return x.moved, nil }

// ReadNDJSON loads an export into a fresh in-memory store, for a post-mortem or a replay.
// An unknown line type is an error naming its line: an export is read whole or not at all.
func ReadNDJSON(r io.Reader) (*Export, error) {
	m := store.NewMemory()
	x := &Export{Memory: m}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 16<<20)
	var lines []Line
	n := 0
	for sc.Scan() {
		n++
		if len(sc.Bytes()) == 0 {
			continue
		}
		var l Line
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			return nil, fmt.Errorf("ndjson line %d: %w", n, err)
		}
		switch {
		case l.Type == "header" && l.Schema != Schema:
			return nil, fmt.Errorf("ndjson line %d: schema %d, this build reads %d", n, l.Schema, Schema)
		case l.Type == "header":
			x.moved = l.MovedAside
		case l.Type == "record" && l.Record != nil, l.Type == "tick" && l.Tick != nil, l.Type == "entry" && l.Entry != nil,
			l.Type == "lease" && l.Lease != nil, l.Type == "outbox" && l.Outbox != nil, l.Type == "applied" && l.Applied != nil:
		default:
			return nil, fmt.Errorf("ndjson line %d: unknown or empty line type %q", n, l.Type)
		}
		lines = append(lines, l)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("ndjson: %w", err)
	}
	err := m.Update(func(tx store.Tx) error { return putLines(tx, lines) })
	if err != nil {
		return nil, fmt.Errorf("ndjson load: %w", err)
	}
	return x, nil
}

// putLines writes the export's lines into tx, in their order.
func putLines(tx store.Tx, lines []Line) error {
	for _, l := range lines {
		var err error
		switch l.Type {
		case "record":
			err = tx.PutRecord(*l.Record)
		case "tick":
			err = tx.PutTick(*l.Tick)
		case "entry":
			_, err = tx.Append(*l.Entry)
		case "lease":
			err = tx.AddLease(*l.Lease)
		case "outbox":
			_, err = tx.Enqueue(*l.Outbox)
		case "applied":
			err = tx.AddApplied(*l.Applied)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
