package store_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/tikali/monky-deployd/store"
)

// impl opens a fresh store of one implementation; reopen returns a store over the same data
// (a new OpenBolt of the same file; the same Memory).
type impl struct {
	name string
	open func(t testing.TB) (s store.Store, reopen func() store.Store)
}

var impls = []impl{
	{"bolt", func(t testing.TB) (store.Store, func() store.Store) {
		path := filepath.Join(t.TempDir(), "state.db")
		open := func() store.Store {
			b, err := store.OpenBolt(path, store.BoltOptions{})
			if err != nil {
				t.Fatalf("OpenBolt: %v", err)
			}
			return b
		}
		return open(), open
	}},
	{"memory", func(t testing.TB) (store.Store, func() store.Store) {
		m := store.NewMemory()
		return m, func() store.Store { return m }
	}},
}

var t0 = time.Date(2026, 11, 29, 14, 1, 0, 0, time.UTC)

func intp(n int) *int { return &n }

func update(t *testing.T, s store.Store, fn func(store.Tx) error) {
	t.Helper()
	if err := s.Update(fn); err != nil {
		t.Fatalf("Update: %v", err)
	}
}

func view(t *testing.T, s store.Store, fn func(store.Tx) error) {
	t.Helper()
	if err := s.View(fn); err != nil {
		t.Fatalf("View: %v", err)
	}
}

func TestSuite(t *testing.T) {
	tests := []struct {
		name string
		run  func(t *testing.T, s store.Store, reopen func() store.Store)
	}{
		{"RecordRoundTrip", testRecordRoundTrip},
		{"JournalOrderAndSeqAcrossReopen", testJournalSeq},
		{"EntriesByTick", testEntriesByTick},
		{"DeleteTickRemovesEntries", testDeleteTick},
		{"TicksOrder", testTicksOrder},
		{"PruneByCount", testPruneByCount},
		{"PruneByAgeKeepsNotable", testPruneByAge},
		{"LeasesSince", testLeases},
		{"PruneAfterClockJumps", testPruneAfterClockJumps},
		{"RestampFutureLeases", testRestampLeases},
		{"Outbox", testOutbox},
		{"AppliedHistory", testApplied},
		{"FailedUpdateWritesNothing", testRollback},
		{"ViewRefusesWrites", testViewRefusesWrites},
	}
	for _, im := range impls {
		t.Run(im.name, func(t *testing.T) {
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) {
					s, reopen := im.open(t)
					tc.run(t, s, reopen)
				})
			}
		})
	}
}

func testRecordRoundTrip(t *testing.T, s store.Store, reopen func() store.Store) {
	view(t, s, func(tx store.Tx) error {
		r, err := tx.Record()
		if err != nil {
			return err
		}
		if !reflect.DeepEqual(r, store.Record{}) {
			t.Errorf("new store record = %+v, want zero", r)
		}
		return nil
	})
	want := store.Record{
		State: "Failed", Tick: 41, Action: "apply", Sha: "7a10aa", BundleURL: "http://t/b", Purge: true,
		AppliedSha: "5b2e", DesiredSha: "7a10aa",
		Attempts:    map[string]int{"Up": 2},
		NextRetryAt: t0.Add(time.Minute), Parked: false,
		Refusal: &store.Refusal{Sha: "x", Code: "ROLLBACK_REFUSED", Detail: "older", At: t0},
		Block:   &store.Block{Code: "AGENT_ENV_MISMATCH", At: t0, ConfigHash: "h", GrantStamp: "12@34"},
		Failure: &store.Failure{Sha: "7a10aa", Code: "COMPOSE_UP", Detail: "rc=1", State: "Up", At: t0},
		Token:   store.TokenMeta{Present: true, Source: "lease", ExpiresAt: t0.Add(time.Hour), EnvID: "env-qa-02"},
		KVMount: "monky", IntervalS: 60, LastCheckinAt: t0,
		LastReport: &store.LastReport{Result: "failed", Sha: "7a10aa", At: t0, Acknowledged: true},
		Containers: []store.Container{{Name: "api-1", Service: "api", State: "running", Health: "healthy"}},
		LastExit:   1, LastTickAt: t0,
	}
	update(t, s, func(tx store.Tx) error { return tx.PutRecord(want) })
	view(t, reopen(), func(tx store.Tx) error {
		got, err := tx.Record()
		if err != nil {
			return err
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("record round trip:\n got %+v\nwant %+v", got, want)
		}
		return nil
	})
}

func entry(tick uint64, from, to string) store.Entry {
	return store.Entry{Tick: tick, At: t0, From: from, To: to, Event: "ev", Ms: 3, Detail: from + "->" + to}
}

func testJournalSeq(t *testing.T, s store.Store, reopen func() store.Store) {
	var seqs []uint64
	update(t, s, func(tx store.Tx) error {
		for _, e := range []store.Entry{entry(1, "Idle", "CheckedIn"), entry(1, "CheckedIn", "Healthy")} {
			seq, err := tx.Append(e)
			if err != nil {
				return err
			}
			seqs = append(seqs, seq)
		}
		return nil
	})
	update(t, s, func(tx store.Tx) error {
		seq, err := tx.Append(entry(1, "Healthy", "Reported"))
		seqs = append(seqs, seq)
		return err
	})
	if want := []uint64{1, 2, 3}; !reflect.DeepEqual(seqs, want) {
		t.Fatalf("seqs = %v, want %v", seqs, want)
	}
	// Removing every entry must not make the counter hand out a number twice.
	update(t, s, func(tx store.Tx) error { return tx.DeleteTick(1) })
	s = reopen()
	update(t, s, func(tx store.Tx) error {
		seq, err := tx.Append(entry(2, "Idle", "CheckedIn"))
		if seq != 4 {
			t.Errorf("seq after reopen = %d, want 4", seq)
		}
		return err
	})
	var got []string
	view(t, s, func(tx store.Tx) error {
		return tx.AllEntries(func(e store.Entry) error {
			got = append(got, fmt.Sprintf("%d:%d:%s", e.Seq, e.Tick, e.Detail))
			return nil
		})
	})
	if want := []string{"4:2:Idle->CheckedIn"}; !reflect.DeepEqual(got, want) {
		t.Errorf("AllEntries = %v, want %v", got, want)
	}
}

func testEntriesByTick(t *testing.T, s store.Store, _ func() store.Store) {
	update(t, s, func(tx store.Tx) error {
		for _, e := range []store.Entry{
			entry(7, "Idle", "CheckedIn"), entry(8, "Idle", "CheckedIn"), entry(7, "CheckedIn", "BundleVerified"),
			entry(256, "Idle", "CheckedIn"), entry(7, "BundleVerified", "Refused"),
		} {
			if _, err := tx.Append(e); err != nil {
				return err
			}
		}
		return nil
	})
	view(t, s, func(tx store.Tx) error {
		es, err := tx.Entries(7)
		if err != nil {
			return err
		}
		var got []string
		for _, e := range es {
			got = append(got, fmt.Sprintf("%d %s", e.Seq, e.Detail))
		}
		want := []string{"1 Idle->CheckedIn", "3 CheckedIn->BundleVerified", "5 BundleVerified->Refused"}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("Entries(7) = %v, want %v", got, want)
		}
		if es[0].At != t0 || es[0].Ms != 3 || es[0].Event != "ev" {
			t.Errorf("entry fields lost: %+v", es[0])
		}
		none, err := tx.Entries(9)
		if err != nil || len(none) != 0 {
			t.Errorf("Entries(9) = %v, %v; want none", none, err)
		}
		one, err := tx.Entries(256)
		if err != nil || len(one) != 1 || one[0].Seq != 4 {
			t.Errorf("Entries(256) = %v, %v; want seq 4", one, err)
		}
		return nil
	})
}

func testDeleteTick(t *testing.T, s store.Store, _ func() store.Store) {
	update(t, s, func(tx store.Tx) error {
		for tick := uint64(1); tick <= 3; tick++ {
			if err := tx.PutTick(store.TickSummary{Tick: tick, StartedAt: t0, Action: "none"}); err != nil {
				return err
			}
			for i := 0; i < 2; i++ {
				if _, err := tx.Append(entry(tick, "Idle", "CheckedIn")); err != nil {
					return err
				}
			}
		}
		return nil
	})
	update(t, s, func(tx store.Tx) error { return tx.DeleteTick(2) })
	view(t, s, func(tx store.Tx) error {
		if _, ok, err := tx.GetTick(2); ok || err != nil {
			t.Errorf("GetTick(2) after delete: ok=%v err=%v", ok, err)
		}
		if es, _ := tx.Entries(2); len(es) != 0 {
			t.Errorf("Entries(2) after delete = %v", es)
		}
		var ticks []uint64
		if err := tx.AllEntries(func(e store.Entry) error { ticks = append(ticks, e.Tick); return nil }); err != nil {
			return err
		}
		if want := []uint64{1, 1, 3, 3}; !reflect.DeepEqual(ticks, want) {
			t.Errorf("journal ticks after DeleteTick(2) = %v, want %v", ticks, want)
		}
		if _, ok, _ := tx.GetTick(3); !ok {
			t.Errorf("tick 3 gone")
		}
		return nil
	})
}

func tickNums(ts []store.TickSummary) []uint64 {
	var out []uint64
	for _, s := range ts {
		out = append(out, s.Tick)
	}
	return out
}

func testTicksOrder(t *testing.T, s store.Store, _ func() store.Store) {
	update(t, s, func(tx store.Tx) error {
		for _, n := range []uint64{3, 1, 5, 2, 4, 300} {
			if err := tx.PutTick(store.TickSummary{Tick: n, StartedAt: t0, Exit: intp(0)}); err != nil {
				return err
			}
		}
		// Folding rewrites a summary in place.
		return tx.PutTick(store.TickSummary{Tick: 5, StartedAt: t0, Exit: intp(0), Folded: 2, LastAt: t0.Add(time.Minute)})
	})
	view(t, s, func(tx store.Tx) error {
		last3, err := tx.Ticks(3)
		if err != nil {
			return err
		}
		if got, want := tickNums(last3), []uint64{4, 5, 300}; !reflect.DeepEqual(got, want) {
			t.Errorf("Ticks(3) = %v, want %v", got, want)
		}
		if last3[1].Folded != 2 || !last3[1].LastAt.Equal(t0.Add(time.Minute)) || *last3[1].Exit != 0 {
			t.Errorf("tick 5 = %+v, want folded 2", last3[1])
		}
		all, err := tx.Ticks(0)
		if err != nil {
			return err
		}
		if got, want := tickNums(all), []uint64{1, 2, 3, 4, 5, 300}; !reflect.DeepEqual(got, want) {
			t.Errorf("Ticks(0) = %v, want %v", got, want)
		}
		if more, _ := tx.Ticks(100); len(more) != 6 {
			t.Errorf("Ticks(100) = %d ticks, want 6", len(more))
		}
		return nil
	})
}

func testPruneByCount(t *testing.T, s store.Store, _ func() store.Store) {
	update(t, s, func(tx store.Tx) error {
		for n := uint64(1); n <= 30; n++ {
			if err := tx.PutTick(store.TickSummary{Tick: n, StartedAt: t0.Add(time.Duration(n) * time.Minute), Action: "none", Exit: intp(0)}); err != nil {
				return err
			}
			if _, err := tx.Append(entry(n, "Idle", "CheckedIn")); err != nil {
				return err
			}
		}
		return nil
	})
	var removed int
	update(t, s, func(tx store.Tx) (err error) {
		removed, err = tx.Prune(store.Retention{MaxTicks: 20, MaxAge: 90 * 24 * time.Hour}, t0.Add(time.Hour))
		return err
	})
	if removed != 10 {
		t.Errorf("Prune removed %d, want 10", removed)
	}
	view(t, s, func(tx store.Tx) error {
		all, _ := tx.Ticks(0)
		if len(all) != 20 || all[0].Tick != 11 || all[19].Tick != 30 {
			t.Errorf("after prune ticks = %v, want 11..30", tickNums(all))
		}
		n := 0
		if err := tx.AllEntries(func(e store.Entry) error {
			n++
			if e.Tick < 11 {
				t.Errorf("entry of pruned tick %d survived", e.Tick)
			}
			return nil
		}); err != nil {
			return err
		}
		if n != 20 {
			t.Errorf("%d journal entries left, want 20", n)
		}
		return nil
	})
	// A second prune has nothing to do.
	update(t, s, func(tx store.Tx) (err error) {
		removed, err = tx.Prune(store.Retention{MaxTicks: 20, MaxAge: 90 * 24 * time.Hour}, t0.Add(time.Hour))
		return err
	})
	if removed != 0 {
		t.Errorf("second Prune removed %d, want 0", removed)
	}
}

func testPruneByAge(t *testing.T, s store.Store, _ func() store.Store) {
	now := t0.Add(200 * 24 * time.Hour)
	day := 24 * time.Hour
	ticks := []store.TickSummary{
		{Tick: 1, StartedAt: t0, Action: "apply", Exit: intp(0)},              // old apply, beyond the notable 2
		{Tick: 2, StartedAt: t0.Add(day), Action: "none", Exit: intp(0)},      // old heartbeat
		{Tick: 3, StartedAt: t0.Add(2 * day), Action: "none", Exit: intp(1)},  // old failed heartbeat: notable
		{Tick: 4, StartedAt: t0.Add(3 * day), Action: "none", Exit: intp(75)}, // old offline: not notable
		{Tick: 5, StartedAt: t0.Add(4 * day), Action: "apply", Exit: intp(1)}, // old refusal: notable
		// folded heartbeat: started long ago, but the newest folded tick ended yesterday
		{Tick: 6, StartedAt: t0.Add(5 * day), Action: "none", Exit: intp(0), Folded: 9000, LastAt: now.Add(-day)},
		{Tick: 7, StartedAt: now.Add(-time.Hour), Action: "none", Exit: intp(0)}, // recent
	}
	update(t, s, func(tx store.Tx) error {
		for _, ts := range ticks {
			if err := tx.PutTick(ts); err != nil {
				return err
			}
			if _, err := tx.Append(entry(ts.Tick, "Idle", "CheckedIn")); err != nil {
				return err
			}
		}
		return nil
	})
	var removed int
	update(t, s, func(tx store.Tx) (err error) {
		// MaxTicks 20 keeps the newest 2 notable ticks even when old.
		removed, err = tx.Prune(store.Retention{MaxTicks: 20, MaxAge: 90 * day}, now)
		return err
	})
	if removed != 3 {
		t.Errorf("Prune removed %d, want 3 (ticks 1, 2, 4)", removed)
	}
	view(t, s, func(tx store.Tx) error {
		all, _ := tx.Ticks(0)
		if got, want := tickNums(all), []uint64{3, 5, 6, 7}; !reflect.DeepEqual(got, want) {
			t.Errorf("kept ticks = %v, want %v", got, want)
		}
		for _, gone := range []uint64{1, 2, 4} {
			if es, _ := tx.Entries(gone); len(es) != 0 {
				t.Errorf("entries of pruned tick %d survived", gone)
			}
		}
		if es, _ := tx.Entries(5); len(es) != 1 {
			t.Errorf("entries of kept tick 5 = %d, want 1", len(es))
		}
		return nil
	})
}

// A clock stepped a year forward (or back) prunes nothing by age: each gap between two ticks
// ages the older ones by a day at most. It used to empty the journal of every heartbeat.
func testPruneAfterClockJumps(t *testing.T, s store.Store, _ func() store.Store) {
	update(t, s, func(tx store.Tx) error {
		for i := 0; i < 100; i++ {
			ts := store.TickSummary{Tick: uint64(i + 1), StartedAt: t0.Add(time.Duration(i) * time.Minute), Action: "none", Exit: intp(0)}
			if err := tx.PutTick(ts); err != nil {
				return err
			}
		}
		return nil
	})
	for _, now := range []time.Time{t0.Add(365 * 24 * time.Hour), t0.Add(-365 * 24 * time.Hour)} {
		var removed int
		update(t, s, func(tx store.Tx) (err error) {
			removed, err = tx.Prune(store.Retention{MaxTicks: 1000, MaxAge: 90 * 24 * time.Hour}, now)
			return err
		})
		if removed != 0 {
			t.Errorf("Prune at %s removed %d ticks of the last 100 minutes", now, removed)
		}
	}
	// the ticks themselves a year apart: the older ones are still a day old at most
	update(t, s, func(tx store.Tx) error {
		return tx.PutTick(store.TickSummary{Tick: 101, StartedAt: t0.Add(365 * 24 * time.Hour), Action: "none", Exit: intp(0)})
	})
	var removed int
	update(t, s, func(tx store.Tx) (err error) {
		removed, err = tx.Prune(store.Retention{MaxTicks: 1000, MaxAge: 90 * 24 * time.Hour}, t0.Add(365*24*time.Hour+time.Minute))
		return err
	})
	if removed != 0 {
		t.Errorf("Prune after a forward jump between ticks removed %d", removed)
	}
}

// Lease events stamped in the future (a clock stepped back) are stamped now.
func testRestampLeases(t *testing.T, s store.Store, _ func() store.Store) {
	now := t0
	update(t, s, func(tx store.Tx) error {
		for _, at := range []time.Time{now.Add(365 * 24 * time.Hour), now.Add(365*24*time.Hour + time.Second), now.Add(-10 * time.Minute), now.Add(time.Minute)} {
			if err := tx.AddLease(store.LeaseEvent{At: at, Outcome: "granted"}); err != nil {
				return err
			}
		}
		n, err := tx.RestampLeases(now, 5*time.Minute)
		if n != 2 {
			t.Errorf("restamped %d, want 2", n)
		}
		return err
	})
	view(t, s, func(tx store.Tx) error {
		evs, err := tx.Leases(now.Add(-time.Hour))
		if len(evs) != 4 {
			t.Errorf("%d events, want 4", len(evs))
		}
		for _, ev := range evs {
			if ev.At.After(now.Add(time.Minute)) {
				t.Errorf("event at %s left in the future", ev.At)
			}
		}
		return err
	})
}

func testLeases(t *testing.T, s store.Store, reopen func() store.Store) {
	now := t0
	update(t, s, func(tx store.Tx) error {
		for _, ev := range []store.LeaseEvent{
			{At: now.Add(-25 * time.Hour), Outcome: "granted"},
			{At: now.Add(-2 * time.Hour), Outcome: "granted"},
			{At: now.Add(-30 * time.Minute), Outcome: "rate-limited"},
			{At: now.Add(-30 * time.Minute), Outcome: "error"}, // same instant: both kept
			{At: now.Add(-10 * time.Minute), Outcome: "granted"},
		} {
			if err := tx.AddLease(ev); err != nil {
				return err
			}
		}
		return nil
	})
	view(t, reopen(), func(tx store.Tx) error {
		hour, err := tx.Leases(now.Add(-time.Hour))
		if err != nil {
			return err
		}
		var got []string
		for _, ev := range hour {
			got = append(got, ev.Outcome)
		}
		if want := []string{"rate-limited", "error", "granted"}; !reflect.DeepEqual(got, want) {
			t.Errorf("Leases(last hour) = %v, want %v", got, want)
		}
		if !hour[0].At.Equal(now.Add(-30 * time.Minute)) {
			t.Errorf("lease time = %v", hour[0].At)
		}
		all, err := tx.Leases(time.Time{})
		if err != nil {
			return err
		}
		if len(all) != 4 {
			t.Errorf("Leases(all) = %d events, want 4 (the 25 h old one dropped)", len(all))
		}
		return nil
	})
}

func testOutbox(t *testing.T, s store.Store, reopen func() store.Store) {
	var ids []uint64
	update(t, s, func(tx store.Tx) error {
		for i, res := range []string{"applied", "failed", "heartbeat"} {
			id, err := tx.Enqueue(store.QueuedReport{
				Queued: t0.Add(time.Duration(i) * time.Second), Body: []byte(`{"result":"` + res + `"}`),
				Meta: store.QueuedReportMeta{Result: res, Sha: "7a10", State: "Healthy"},
			})
			if err != nil {
				return err
			}
			ids = append(ids, id)
		}
		return nil
	})
	if want := []uint64{1, 2, 3}; !reflect.DeepEqual(ids, want) {
		t.Fatalf("Enqueue ids = %v, want %v", ids, want)
	}
	update(t, s, func(tx store.Tx) error {
		q, err := tx.Outbox()
		if err != nil {
			return err
		}
		q[0].Attempts = 2
		if err := tx.UpdateQueued(q[0]); err != nil {
			return err
		}
		return tx.Ack(2)
	})
	s = reopen()
	view(t, s, func(tx store.Tx) error {
		q, err := tx.Outbox()
		if err != nil {
			return err
		}
		if len(q) != 2 || q[0].ID != 1 || q[1].ID != 3 {
			t.Fatalf("outbox after ack = %+v, want ids 1, 3", q)
		}
		if q[0].Attempts != 2 || string(q[0].Body) != `{"result":"applied"}` || q[0].Meta.Result != "applied" || !q[0].Queued.Equal(t0) {
			t.Errorf("queued report 1 = %+v", q[0])
		}
		return nil
	})
	update(t, s, func(tx store.Tx) error {
		if err := tx.Ack(2); err != nil {
			t.Errorf("second Ack(2): %v, want nil", err)
		}
		if err := tx.UpdateQueued(store.QueuedReport{ID: 2, Attempts: 9}); err == nil {
			t.Errorf("UpdateQueued of an acknowledged report succeeded")
		}
		id, err := tx.Enqueue(store.QueuedReport{Body: []byte(`{}`)})
		if id != 4 {
			t.Errorf("id after ack = %d, want 4 (never reused)", id)
		}
		return err
	})
	view(t, s, func(tx store.Tx) error {
		q, _ := tx.Outbox()
		if len(q) != 3 || q[2].ID != 4 {
			t.Errorf("outbox = %+v, want ids 1, 3, 4", q)
		}
		return nil
	})
}

func testApplied(t *testing.T, s store.Store, reopen func() store.Store) {
	update(t, s, func(tx store.Tx) error {
		for i := 1; i <= 60; i++ {
			if err := tx.AddApplied(store.Applied{Sha: fmt.Sprintf("sha%03d", i), At: t0.Add(time.Duration(i) * time.Minute)}); err != nil {
				return err
			}
		}
		return nil
	})
	update(t, s, func(tx store.Tx) error {
		for i := 61; i <= 105; i++ {
			if err := tx.AddApplied(store.Applied{Sha: fmt.Sprintf("sha%03d", i), At: t0.Add(time.Duration(i) * time.Minute)}); err != nil {
				return err
			}
		}
		return nil
	})
	view(t, reopen(), func(tx store.Tx) error {
		h, err := tx.AppliedHistory()
		if err != nil {
			return err
		}
		if len(h) != 100 || h[0].Sha != "sha006" || h[99].Sha != "sha105" || !h[99].At.Equal(t0.Add(105*time.Minute)) {
			t.Errorf("history: %d entries, first %+v, last %+v; want 100, sha006..sha105", len(h), h[0], h[len(h)-1])
		}
		return nil
	})
}

func testRollback(t *testing.T, s store.Store, _ func() store.Store) {
	update(t, s, func(tx store.Tx) error { return tx.PutRecord(store.Record{State: "Idle", Tick: 1}) })
	boom := errors.New("boom")
	err := s.Update(func(tx store.Tx) error {
		if err := tx.PutRecord(store.Record{State: "Leased", Tick: 2}); err != nil {
			return err
		}
		if _, err := tx.Append(entry(2, "Idle", "CheckedIn")); err != nil {
			return err
		}
		if err := tx.PutTick(store.TickSummary{Tick: 2, StartedAt: t0}); err != nil {
			return err
		}
		if err := tx.AddLease(store.LeaseEvent{At: t0, Outcome: "granted"}); err != nil {
			return err
		}
		if _, err := tx.Enqueue(store.QueuedReport{Body: []byte(`{}`)}); err != nil {
			return err
		}
		if err := tx.AddApplied(store.Applied{Sha: "x", At: t0}); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Update = %v, want fn's error", err)
	}
	view(t, s, func(tx store.Tx) error {
		r, _ := tx.Record()
		if r.State != "Idle" || r.Tick != 1 {
			t.Errorf("record after failed update = %+v, want Idle/1", r)
		}
		n := 0
		_ = tx.AllEntries(func(store.Entry) error { n++; return nil })
		ticks, _ := tx.Ticks(0)
		leases, _ := tx.Leases(time.Time{})
		q, _ := tx.Outbox()
		h, _ := tx.AppliedHistory()
		if n+len(ticks)+len(leases)+len(q)+len(h) != 0 {
			t.Errorf("failed update left entries=%d ticks=%d leases=%d outbox=%d applied=%d", n, len(ticks), len(leases), len(q), len(h))
		}
		return nil
	})
	// Counters rolled back too: the first entry that sticks is seq 1.
	update(t, s, func(tx store.Tx) error {
		seq, err := tx.Append(entry(3, "Idle", "CheckedIn"))
		if seq != 1 {
			t.Errorf("seq after rolled-back append = %d, want 1", seq)
		}
		return err
	})
}

func testViewRefusesWrites(t *testing.T, s store.Store, _ func() store.Store) {
	err := s.View(func(tx store.Tx) error {
		if err := tx.PutRecord(store.Record{State: "Idle"}); err == nil {
			t.Errorf("PutRecord in View succeeded")
		}
		if _, err := tx.Append(entry(1, "a", "b")); err == nil {
			t.Errorf("Append in View succeeded")
		}
		return nil
	})
	if err != nil {
		t.Fatalf("View: %v", err)
	}
	view(t, s, func(tx store.Tx) error {
		if r, _ := tx.Record(); r.State != "" {
			t.Errorf("write in View stuck: %+v", r)
		}
		return nil
	})
}
