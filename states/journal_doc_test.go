package states_test

import (
	"encoding/json"
	"os"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/internal/vocab"
	"github.com/tikali/monky-deployd/machine"
	"github.com/tikali/monky-deployd/store"
	"github.com/tikali/monky-deployd/test/sim"
)

var backticked = regexp.MustCompile("`([^`]+)`")

// docValues reads docs/JOURNAL.md's "Values" table: field → every value it lists.
func docValues(t *testing.T, doc string) map[string]map[string]bool {
	t.Helper()
	i := strings.Index(doc, "### Values")
	if i < 0 {
		t.Fatal("docs/JOURNAL.md has no Values table")
	}
	out := map[string]map[string]bool{}
	for _, line := range strings.Split(doc[i:], "\n")[1:] {
		if strings.HasPrefix(line, "### ") {
			break
		}
		cells := strings.Split(line, "|")
		if len(cells) < 4 || !strings.Contains(cells[1], "`") {
			continue
		}
		key := backticked.FindStringSubmatch(cells[1])[1]
		if strings.Contains(cells[1], "of a note") {
			key = "note"
		}
		set := map[string]bool{}
		for _, m := range backticked.FindAllStringSubmatch(cells[2], -1) {
			set[m[1]] = true
		}
		out[key] = set
	}
	return out
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// jsonFields lists the JSON names of a struct's fields, recursing into structs it holds.
func jsonFields(typ reflect.Type, into map[string]bool) {
	for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice || typ.Kind() == reflect.Map {
		typ = typ.Elem()
	}
	if typ.Kind() != reflect.Struct || typ == reflect.TypeOf(time.Time{}) {
		return
	}
	for i := 0; i < typ.NumField(); i++ {
		f := typ.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		into[name] = true
		jsonFields(f.Type, into)
	}
}

// collect walks decoded JSON, noting every key and the values of the enumerated fields.
func collect(v any, path string, fields map[string]bool, values map[string]map[string]bool) {
	switch x := v.(type) {
	case map[string]any:
		for k, val := range x {
			if path == "attempts" {
				add(values, "state", k) // attempts are keyed by state
				continue
			}
			fields[k] = true
			if s, ok := val.(string); ok {
				add(values, k, s)
			}
			if f, ok := val.(float64); ok && (k == "exit" || k == "last_exit") {
				add(values, "exit", strings.TrimSuffix(strings.TrimSuffix(jsonNum(f), ".0"), ".00"))
			}
			collect(val, k, fields, values)
		}
	case []any:
		for _, e := range x {
			collect(e, path, fields, values)
		}
	}
}

func jsonNum(f float64) string { b, _ := json.Marshal(f); return string(b) }

func add(values map[string]map[string]bool, k, v string) {
	if values[k] == nil {
		values[k] = map[string]bool{}
	}
	values[k][v] = true
}

// TestJournalDocMatchesTheFile writes a state file through the real engine — applies, a
// refusal, a failure, resume, a report left in the outbox, a retire — and checks
// docs/JOURNAL.md against it and against the code: every field of every record is documented,
// every value the file holds is listed, and every value listed is one the code can write.
func TestJournalDocMatchesTheFile(t *testing.T) {
	raw, err := os.ReadFile("../docs/JOURNAL.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := regexp.MustCompile("(?s)```.*?```").ReplaceAllString(string(raw), "")
	documented := map[string]bool{}
	for _, m := range backticked.FindAllStringSubmatch(doc, -1) {
		documented[m[1]] = true
		for _, part := range strings.FieldsFunc(m[1], func(r rune) bool { return strings.ContainsRune("{}, []", r) }) {
			documented[part] = true
		}
	}

	// a file written by real ticks
	h := newHarness(t)
	h.apply("v1")
	h.release("v2", func(f map[string][]byte) { f["compose.yaml"] = append(f["compose.yaml"], "    privileged: true\n"...) })
	h.wantExit(h.tick(), 1)
	h.dockerKnob("up-error", "port is already allocated")
	h.release("v3", nil)
	h.wantExit(h.tick(), 1)
	a := h.agent()
	a.Operator = "uid 1000 (alice)"
	if _, err := a.Resume(false); err != nil {
		t.Fatal(err)
	}
	h.dockerKnob("up-error", "")
	h.sim.Fail(sim.FailRule{Path: "/v1/agent/report", Status: 503, Times: 1})
	h.wantExit(h.tick(), 75)
	h.wantExit(h.tick(), 0)
	if err := h.sim.Retire(env, false); err != nil {
		t.Fatal(err)
	}
	h.wantExit(h.tick(), 0)

	fields := map[string]bool{}
	values := map[string]map[string]bool{}
	var ticks []store.TickSummary
	if err := h.st.View(func(tx store.Tx) error {
		var objs []any
		rec, err := tx.Record()
		if err != nil {
			return err
		}
		objs = append(objs, rec)
		if ticks, err = tx.Ticks(0); err != nil {
			return err
		}
		for _, s := range ticks {
			objs = append(objs, s)
		}
		if err := tx.AllEntries(func(e store.Entry) error {
			objs = append(objs, e)
			if e.From == e.To {
				add(values, "note", e.Event)
			} else {
				add(values, "event", e.Event)
			}
			return nil
		}); err != nil {
			return err
		}
		leases, err := tx.Leases(time.Time{})
		if err != nil {
			return err
		}
		for _, l := range leases {
			objs = append(objs, l)
		}
		hist, err := tx.AppliedHistory()
		if err != nil {
			return err
		}
		for _, x := range hist {
			objs = append(objs, x)
		}
		for _, o := range objs {
			b, _ := json.Marshal(o)
			var v any
			if err := json.Unmarshal(b, &v); err != nil {
				return err
			}
			collect(v, "", fields, values)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, s := range ticks {
		add(values, "tick-action", s.Action)
	}
	delete(values, "event") // entries: split into transitions and notes above
	for _, k := range []string{"from", "to"} {
		for v := range values[k] {
			add(values, "state", v)
		}
	}

	// every field the file holds, and every field the code can write, is documented
	for _, typ := range []any{store.Record{}, store.Entry{}, store.TickSummary{}, store.LeaseEvent{}, store.QueuedReport{}, store.Applied{}} {
		jsonFields(reflect.TypeOf(typ), fields)
	}
	for _, f := range keys(fields) {
		if !documented[f] {
			t.Errorf("field %q is not in docs/JOURNAL.md", f)
		}
	}

	// the values table: what the code can write, exactly; and everything the file holds is in it
	table := docValues(t, doc)
	var states, transitions []string
	for _, s := range machine.All {
		states = append(states, string(s))
	}
	for _, e := range machine.Table {
		transitions = append(transitions, e.Name)
	}
	code := map[string][]string{
		"state":   states,
		"event":   transitions,
		"note":    machine.Notes,
		"action":  {vocab.ActionApply, vocab.ActionNone, vocab.ActionDown, vocab.ActionResume, vocab.ActionHold},
		"source":  {"bootstrap", "lease"},
		"result":  {effects.ResultApplied, effects.ResultFailed, effects.ResultDown},
		"outcome": {machine.LeaseAsked},
		"exit":    {"0", "1", "75", "78"},
	}
	for field, want := range code {
		got := table[field]
		sort.Strings(want)
		if strings.Join(keys(got), " ") != strings.Join(want, " ") {
			t.Errorf("docs/JOURNAL.md lists for %s:\n  %v\nthe code writes:\n  %v", field, keys(got), want)
		}
	}
	seen := map[string]string{"state": "state", "note": "note", "source": "source", "result": "result", "outcome": "outcome", "exit": "exit", "action": "action", "tick-action": "action"}
	for k, field := range seen {
		for v := range values[k] {
			if v == "" {
				continue
			}
			if !table[field][v] {
				t.Errorf("the file holds %s %q, which docs/JOURNAL.md does not list", k, v)
			}
		}
	}
	if !values["note"][machine.NoteTickEnd] || !values["outcome"][machine.LeaseAsked] || !values["tick-action"][vocab.ActionResume] {
		t.Errorf("the scenario did not write what it should: notes %v, outcomes %v, tick actions %v", keys(values["note"]), keys(values["outcome"]), keys(values["tick-action"]))
	}
	// every code the agent decides itself is in the doc
	for _, c := range []vocab.Code{vocab.ReportPending, vocab.OutboxStuck, vocab.Temporary, vocab.BaoUnavailable, vocab.TickDeadline,
		vocab.LocalFailure, vocab.TokenExpired, vocab.TokenExpiring, vocab.LeaseBudget, vocab.LeaseEveryTick} {
		if !documented[string(c)] {
			t.Errorf("code %s is not in docs/JOURNAL.md", c)
		}
	}
}
