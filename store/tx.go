package store

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/tikali/monky-deployd/internal/redact"
	"github.com/tikali/monky-deployd/internal/vocab"
)

// Bucket and key names. They are the layout drawn at the top of bolt.go and documented in
// docs/JOURNAL.md; the in-memory store keeps the same buckets so both behave alike.
const (
	bucketMeta        = "meta"
	bucketJournal     = "journal"
	bucketTickEntries = "tick_entries"
	bucketTicks       = "ticks"
	bucketLeases      = "leases"
	bucketOutbox      = "outbox"
	bucketApplied     = "applied"

	keyVersion    = "version"
	keyRecord     = "record"
	keySeqJournal = "seq.journal"
	keySeqOutbox  = "seq.outbox"
	keySeqApplied = "seq.applied"
)

// allBuckets is every top-level bucket, created on a new file and on each write transaction.
var allBuckets = []string{
	bucketMeta, bucketJournal, bucketTickEntries, bucketTicks, bucketLeases, bucketOutbox, bucketApplied,
}

const (
	// leaseWindow is how long lease events are kept (the budget looks back one hour).
	leaseWindow = 24 * time.Hour
	// appliedMax bounds the applied-sha history.
	appliedMax = 100
)

// errNotWritable is returned by a write in a View (both implementations say the same).
var errNotWritable = errors.New("write in a read-only transaction")

// kvBucket is the little an implementation must provide: an ordered byte map.
// Values passed to callbacks are only valid during the callback.
type kvBucket interface {
	get(k []byte) []byte
	put(k, v []byte) error
	del(k []byte) error
	// ascend calls fn for each key >= from (nil: the first) in key order until fn returns false.
	ascend(from []byte, fn func(k, v []byte) (bool, error)) error
	// descend calls fn for each key from the last one backwards until fn returns false.
	descend(fn func(k, v []byte) (bool, error)) error
}

// kvTx hands out the buckets of one transaction; a missing bucket reads as empty.
type kvTx interface {
	bucket(name string) kvBucket
}

// tx implements Tx over a kvTx. It is the only place that knows the layout.
type tx struct {
	kv kvTx
}

var _ Tx = (*tx)(nil)

func u64key(n uint64) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], n)
	return b[:]
}

func tickSeqKey(tick, seq uint64) []byte {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], tick)
	binary.BigEndian.PutUint64(b[8:], seq)
	return b[:]
}

// nanosKey encodes a time as big-endian unix nanoseconds; times before 1970 encode as 0.
func nanosKey(t time.Time) []byte {
	if t.Before(time.Unix(0, 0)) {
		return u64key(0)
	}
	return u64key(uint64(t.UnixNano()))
}

func copyBytes(b []byte) []byte { return append([]byte(nil), b...) }

func (t *tx) getJSON(bucket, key string, v any) (bool, error) {
	raw := t.kv.bucket(bucket).get([]byte(key))
	if raw == nil {
		return false, nil
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return false, fmt.Errorf("decode %s/%s: %w", bucket, key, err)
	}
	return true, nil
}

func (t *tx) putJSON(b kvBucket, key []byte, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode: %w", err)
	}
	return b.put(key, raw)
}

// ascendJSON decodes the values of b from key from (nil: the first) in key order and calls fn
// with each until fn returns false; what names the values in a decode error.
func ascendJSON[T any](b kvBucket, from []byte, what string, fn func(k []byte, v T) (bool, error)) error {
	return b.ascend(from, func(k, raw []byte) (bool, error) {
		var v T
		if err := json.Unmarshal(raw, &v); err != nil {
			return false, fmt.Errorf("decode %s %x: %w", what, k, err)
		}
		return fn(k, v)
	})
}

// allJSON is every value of b decoded, in key order; nil when b is empty.
func allJSON[T any](b kvBucket, what string) ([]T, error) {
	var out []T
	err := ascendJSON(b, nil, what, func(_ []byte, v T) (bool, error) {
		out = append(out, v)
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// nextSeq increments and returns a counter kept as decimal text in meta.
func (t *tx) nextSeq(key string) (uint64, error) {
	meta := t.kv.bucket(bucketMeta)
	var n uint64
	if raw := meta.get([]byte(key)); raw != nil {
		v, err := strconv.ParseUint(string(raw), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("decode meta/%s: %w", key, err)
		}
		n = v
	}
	n++
	if err := meta.put([]byte(key), []byte(strconv.FormatUint(n, 10))); err != nil {
		return 0, fmt.Errorf("meta/%s: %w", key, err)
	}
	return n, nil
}

func (t *tx) Record() (Record, error) {
	var r Record
	if _, err := t.getJSON(bucketMeta, keyRecord, &r); err != nil {
		return Record{}, err
	}
	return r, nil
}

func (t *tx) PutRecord(r Record) error {
	r = redactRecord(r)
	if err := t.putJSON(t.kv.bucket(bucketMeta), []byte(keyRecord), r); err != nil {
		return fmt.Errorf("put record: %w", err)
	}
	return nil
}

func (t *tx) Append(e Entry) (uint64, error) {
	seq, err := t.nextSeq(keySeqJournal)
	if err != nil {
		return 0, fmt.Errorf("append: %w", err)
	}
	e.Seq = seq
	e.Detail = redact.String(e.Detail)
	if err := t.putJSON(t.kv.bucket(bucketJournal), u64key(seq), e); err != nil {
		return 0, fmt.Errorf("append: %w", err)
	}
	if err := t.kv.bucket(bucketTickEntries).put(tickSeqKey(e.Tick, seq), []byte{}); err != nil {
		return 0, fmt.Errorf("append: index: %w", err)
	}
	return seq, nil
}

// tickSeqs returns the journal sequence numbers of one tick, in order, from the index.
func (t *tx) tickSeqs(tick uint64) ([]uint64, error) {
	prefix := u64key(tick)
	var seqs []uint64
	err := t.kv.bucket(bucketTickEntries).ascend(prefix, func(k, _ []byte) (bool, error) {
		if len(k) != 16 || !bytes.HasPrefix(k, prefix) {
			return false, nil
		}
		seqs = append(seqs, binary.BigEndian.Uint64(k[8:]))
		return true, nil
	})
	return seqs, err
}

func (t *tx) Entries(tick uint64) ([]Entry, error) {
	seqs, err := t.tickSeqs(tick)
	if err != nil {
		return nil, fmt.Errorf("entries of tick %d: %w", tick, err)
	}
	journal := t.kv.bucket(bucketJournal)
	out := make([]Entry, 0, len(seqs))
	for _, seq := range seqs {
		raw := journal.get(u64key(seq))
		if raw == nil {
			continue // index ahead of a removed entry: nothing to show
		}
		var e Entry
		if err := json.Unmarshal(raw, &e); err != nil {
			return nil, fmt.Errorf("decode journal entry %d: %w", seq, err)
		}
		out = append(out, e)
	}
	return out, nil
}

func (t *tx) AllEntries(fn func(Entry) error) error {
	return ascendJSON(t.kv.bucket(bucketJournal), nil, "journal entry", func(_ []byte, e Entry) (bool, error) {
		if err := fn(e); err != nil {
			return false, err
		}
		return true, nil
	})
}

func (t *tx) PutTick(s TickSummary) error {
	if err := t.putJSON(t.kv.bucket(bucketTicks), u64key(s.Tick), s); err != nil {
		return fmt.Errorf("put tick %d: %w", s.Tick, err)
	}
	return nil
}

func (t *tx) GetTick(tick uint64) (TickSummary, bool, error) {
	raw := t.kv.bucket(bucketTicks).get(u64key(tick))
	if raw == nil {
		return TickSummary{}, false, nil
	}
	var s TickSummary
	if err := json.Unmarshal(raw, &s); err != nil {
		return TickSummary{}, false, fmt.Errorf("decode tick %d: %w", tick, err)
	}
	return s, true, nil
}

func (t *tx) Ticks(n int) ([]TickSummary, error) {
	var out []TickSummary
	err := t.kv.bucket(bucketTicks).descend(func(k, v []byte) (bool, error) {
		var s TickSummary
		if err := json.Unmarshal(v, &s); err != nil {
			return false, fmt.Errorf("decode tick %x: %w", k, err)
		}
		out = append(out, s)
		return n <= 0 || len(out) < n, nil
	})
	if err != nil {
		return nil, err
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out, nil
}

func (t *tx) DeleteTick(tick uint64) error {
	if err := t.kv.bucket(bucketTicks).del(u64key(tick)); err != nil {
		return fmt.Errorf("delete tick %d: %w", tick, err)
	}
	return t.deleteEntries(tick)
}

func (t *tx) deleteEntries(tick uint64) error {
	seqs, err := t.tickSeqs(tick)
	if err != nil {
		return fmt.Errorf("delete entries of tick %d: %w", tick, err)
	}
	journal, index := t.kv.bucket(bucketJournal), t.kv.bucket(bucketTickEntries)
	for _, seq := range seqs {
		if err := journal.del(u64key(seq)); err != nil {
			return fmt.Errorf("delete journal entry %d: %w", seq, err)
		}
		if err := index.del(tickSeqKey(tick, seq)); err != nil {
			return fmt.Errorf("delete journal index %d/%d: %w", tick, seq, err)
		}
	}
	return nil
}

// notable reports whether a tick did something a support engineer will ask about: an apply or a
// retire (refusals and failures happen on those), or a tick that ended with exit 1 or 78.
// Heartbeats that only checked in, and temporary failures (exit 75), are not notable.
func notable(s TickSummary) bool {
	if s.Action != "" && s.Action != vocab.ActionNone {
		return true
	}
	return s.Exit != nil && *s.Exit != vocab.ExitOK && *s.Exit != vocab.ExitTemporary
}

// maxGap is the most one gap between two ticks adds to the older one's age (Prune).
const maxGap = 24 * time.Hour

func clampGap(d, most time.Duration) time.Duration {
	return min(max(d, 0), most)
}

// lastSeen is when a tick last did anything: its end, or the end of the newest tick folded into it.
func lastSeen(s TickSummary) time.Time {
	last := s.StartedAt
	if s.EndedAt.After(last) {
		last = s.EndedAt
	}
	if s.LastAt.After(last) {
		last = s.LastAt
	}
	return last
}

// olderAge is the age of all[i] given age, that of all[i+1] (ignored for the newest tick): the
// time the ticks after it account for, each gap between two ticks counted at most maxGap and a
// folded tick's span at most maxGap per tick folded into it. A clock stepped forward (or a box
// that was off) ages nothing by more than that, so it never empties the journal; a clock
// stepped back ages nothing.
func olderAge(all []TickSummary, i int, age time.Duration, now time.Time) time.Duration {
	s := all[i]
	if i == len(all)-1 {
		return clampGap(now.Sub(lastSeen(s)), maxGap)
	}
	newer := all[i+1]
	age += clampGap(lastSeen(newer).Sub(newer.StartedAt), time.Duration(newer.Folded+1)*maxGap)
	return age + clampGap(newer.StartedAt.Sub(lastSeen(s)), maxGap)
}

// Prune keeps the newest r.MaxTicks ticks that are not older than r.MaxAge (by lastSeen), plus
// the newest r.MaxTicks/10 notable ticks whatever their age or rank; every other tick summary is
// removed with its journal entries. Journal entries of ticks without a summary that are older than
// the newest removed tick go too. MaxTicks <= 0 or MaxAge <= 0 switch that bound off.
func (t *tx) Prune(r Retention, now time.Time) (int, error) {
	all, err := t.Ticks(0)
	if err != nil {
		return 0, fmt.Errorf("prune: %w", err)
	}
	keepNotable := 0
	if r.MaxTicks > 0 {
		keepNotable = r.MaxTicks / 10
	}
	removed := 0
	var newestRemoved uint64
	kept, notableKept := 0, 0
	var age time.Duration
	for i := len(all) - 1; i >= 0; i-- { // newest first
		s := all[i]
		age = olderAge(all, i, age, now)
		keep := (r.MaxTicks <= 0 || kept < r.MaxTicks) && (r.MaxAge <= 0 || age <= r.MaxAge)
		if keep {
			kept++
		}
		if notable(s) && notableKept < keepNotable {
			notableKept++
			keep = true
		}
		if keep {
			continue
		}
		if err := t.DeleteTick(s.Tick); err != nil {
			return removed, fmt.Errorf("prune: %w", err)
		}
		removed++
		if s.Tick > newestRemoved {
			newestRemoved = s.Tick
		}
	}
	if removed > 0 {
		if err := t.pruneOrphans(newestRemoved); err != nil {
			return removed, fmt.Errorf("prune: %w", err)
		}
	}
	return removed, nil
}

// pruneOrphans removes journal entries of ticks below limit that have no tick summary.
func (t *tx) pruneOrphans(limit uint64) error {
	var orphans []uint64
	ticks := t.kv.bucket(bucketTicks)
	err := t.kv.bucket(bucketTickEntries).ascend(nil, func(k, _ []byte) (bool, error) {
		if len(k) != 16 {
			return true, nil
		}
		tick := binary.BigEndian.Uint64(k[:8])
		if tick >= limit {
			return false, nil
		}
		if ticks.get(u64key(tick)) == nil && (len(orphans) == 0 || orphans[len(orphans)-1] != tick) {
			orphans = append(orphans, tick)
		}
		return true, nil
	})
	if err != nil {
		return err
	}
	for _, tick := range orphans {
		if err := t.deleteEntries(tick); err != nil {
			return err
		}
	}
	return nil
}

// AddLease records a lease event and drops the events older than 24 h before it.
func (t *tx) AddLease(ev LeaseEvent) error {
	b := t.kv.bucket(bucketLeases)
	key := nanosKey(ev.At)
	for b.get(key) != nil { // two events in the same nanosecond: the next free key
		key = u64key(binary.BigEndian.Uint64(key) + 1)
	}
	if err := t.putJSON(b, key, ev); err != nil {
		return fmt.Errorf("add lease: %w", err)
	}
	limit := nanosKey(ev.At.Add(-leaseWindow))
	var old [][]byte
	err := b.ascend(nil, func(k, _ []byte) (bool, error) {
		if bytes.Compare(k, limit) >= 0 {
			return false, nil
		}
		old = append(old, copyBytes(k))
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("add lease: %w", err)
	}
	for _, k := range old {
		if err := b.del(k); err != nil {
			return fmt.Errorf("add lease: drop old: %w", err)
		}
	}
	return nil
}

func (t *tx) RestampLeases(now time.Time, skew time.Duration) (int, error) {
	b := t.kv.bucket(bucketLeases)
	var keys [][]byte
	var evs []LeaseEvent
	err := ascendJSON(b, nanosKey(now.Add(skew+1)), "lease", func(k []byte, ev LeaseEvent) (bool, error) {
		keys = append(keys, copyBytes(k))
		evs = append(evs, ev)
		return true, nil
	})
	if err != nil {
		return 0, fmt.Errorf("restamp leases: %w", err)
	}
	for _, k := range keys {
		if err := b.del(k); err != nil {
			return 0, fmt.Errorf("restamp leases: %w", err)
		}
	}
	for _, ev := range evs {
		ev.At = now
		if err := t.AddLease(ev); err != nil {
			return 0, fmt.Errorf("restamp leases: %w", err)
		}
	}
	return len(evs), nil
}

func (t *tx) Leases(since time.Time) ([]LeaseEvent, error) {
	var out []LeaseEvent
	err := ascendJSON(t.kv.bucket(bucketLeases), nanosKey(since), "lease", func(_ []byte, ev LeaseEvent) (bool, error) {
		if !ev.At.Before(since) {
			out = append(out, ev)
		}
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (t *tx) Enqueue(q QueuedReport) (uint64, error) {
	id, err := t.nextSeq(keySeqOutbox)
	if err != nil {
		return 0, fmt.Errorf("enqueue: %w", err)
	}
	q.ID = id
	q.Body = redact.Default.JSON(q.Body)
	if err := t.putJSON(t.kv.bucket(bucketOutbox), u64key(id), q); err != nil {
		return 0, fmt.Errorf("enqueue: %w", err)
	}
	return id, nil
}

func (t *tx) Outbox() ([]QueuedReport, error) {
	return allJSON[QueuedReport](t.kv.bucket(bucketOutbox), "queued report")
}

// UpdateQueued rewrites a queued report; one that was acknowledged meanwhile is an error,
// never brought back.
func (t *tx) UpdateQueued(q QueuedReport) error {
	b := t.kv.bucket(bucketOutbox)
	if b.get(u64key(q.ID)) == nil {
		return fmt.Errorf("update queued report %d: not in the outbox", q.ID)
	}
	q.Body = redact.Default.JSON(q.Body)
	if err := t.putJSON(b, u64key(q.ID), q); err != nil {
		return fmt.Errorf("update queued report %d: %w", q.ID, err)
	}
	return nil
}

// Ack removes a report from the outbox; acknowledging one twice is not an error.
func (t *tx) Ack(id uint64) error {
	if err := t.kv.bucket(bucketOutbox).del(u64key(id)); err != nil {
		return fmt.Errorf("ack report %d: %w", id, err)
	}
	return nil
}

func (t *tx) AddApplied(a Applied) error {
	seq, err := t.nextSeq(keySeqApplied)
	if err != nil {
		return fmt.Errorf("add applied: %w", err)
	}
	b := t.kv.bucket(bucketApplied)
	if err := t.putJSON(b, u64key(seq), a); err != nil {
		return fmt.Errorf("add applied: %w", err)
	}
	var keys [][]byte
	if err := b.ascend(nil, func(k, _ []byte) (bool, error) {
		keys = append(keys, copyBytes(k))
		return true, nil
	}); err != nil {
		return fmt.Errorf("add applied: %w", err)
	}
	for len(keys) > appliedMax {
		if err := b.del(keys[0]); err != nil {
			return fmt.Errorf("add applied: trim: %w", err)
		}
		keys = keys[1:]
	}
	return nil
}

func (t *tx) AppliedHistory() ([]Applied, error) {
	return allJSON[Applied](t.kv.bucket(bucketApplied), "applied")
}

// redactRecord is r with every word it keeps from a failure, a refusal, a block or a report
// masked (a code is the vocabulary's or the far side's, never masked): the record is written
// nowhere else, so no caller has to remember to. The pointed-to structs are copied, never
// changed in place.
func redactRecord(r Record) Record {
	if r.Refusal != nil {
		c := *r.Refusal
		c.Detail = redact.String(c.Detail)
		r.Refusal = &c
	}
	if r.Block != nil {
		c := *r.Block
		c.Detail = redact.String(c.Detail)
		r.Block = &c
	}
	if r.Failure != nil {
		c := *r.Failure
		c.Detail = redact.String(c.Detail)
		r.Failure = &c
	}
	if r.LastReport != nil {
		c := *r.LastReport
		c.Detail = redact.String(c.Detail)
		r.LastReport = &c
	}
	return r
}
