// Package metrics writes the agent's state, after every tick, as a node_exporter textfile
// collector file (`metrics_path`), so a fleet can alert on boxes that stopped checking in, stay
// refused, or hold a token about to expire.
//
// It reads the state file and a small counters file beside it; it never dials out and never
// sees a secret (the store holds none). The families are built as client_model values and
// written with Prometheus' own text encoder (expfmt): no registry, nothing built at package
// init. Counters that must survive the journal's folding and pruning (ticks by exit code,
// failures and refusals by code) are kept in `<state_dir>/metrics.json`, replaced atomically
// each tick.
//
// Like explain (machine/explain, whose verdicts it counts) it reads what the state machine
// wrote, so it sits in machine/, above machine and store and below the cmd that runs it.
package metrics

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/tikali/monky-deployd/effects/files"
	"github.com/tikali/monky-deployd/machine"
	"github.com/tikali/monky-deployd/machine/explain"
	"github.com/tikali/monky-deployd/store"
)

// CountersFile is the name of the counters file in the state directory.
const CountersFile = "metrics.json"

// Tick is what the caller knows of the tick that just ended and of the build.
type Tick struct {
	Exit     int
	Code     string // the code the tick ended with ("" when it has none)
	Duration time.Duration
	EndedAt  time.Time
	// Interval is how often ticks run (the timer's or the loop's interval): the alert rules
	// call the file stale past three of them.
	Interval time.Duration
	// Version and Transports are the build's (monky_deployd_build_info).
	Version    string
	Transports []string
	// Limits are the box's stuck_after_s and stale_after_s: the verdict is read with them.
	Limits explain.Limits
}

// Counters are the totals the textfile carries across ticks.
type Counters struct {
	TicksByExit    map[string]float64 `json:"ticks_by_exit"`
	FailuresByCode map[string]float64 `json:"failures_by_code"`
	RefusalsByCode map[string]float64 `json:"refusals_by_code"`
	// CountedTick is the last tick counted, so a second write for the same tick adds nothing.
	CountedTick uint64 `json:"counted_tick"`
}

// NoCode is the code label of a failed tick whose error carries no code.
const NoCode = "NONE"

// Write counts the tick, then writes the textfile at path from the state file and the tick.
// countersPath is the counters file (see CountersFile).
func Write(path, countersPath string, st store.Store, t Tick) error {
	var rec store.Record
	var newRefusals []string
	var used int
	var outbox int
	var v explain.Verdict
	var unanswered bool
	err := st.View(func(tx store.Tx) error {
		var err error
		if rec, err = tx.Record(); err != nil {
			return err
		}
		in, err := explain.ReadWith(tx, t.EndedAt, t.Limits)
		if err != nil {
			return err
		}
		v = explain.Decide(in)
		unanswered = checkinUnanswered(in)
		if newRefusals, err = refusalsOf(tx, rec.Tick); err != nil {
			return err
		}
		if used, _, err = machine.LeaseBudget(tx, t.EndedAt); err != nil {
			return err
		}
		q, err := tx.Outbox()
		outbox = len(q)
		return err
	})
	if err != nil {
		return fmt.Errorf("metrics: read state: %w", err)
	}
	c, err := readCounters(countersPath)
	if err != nil {
		return err
	}
	if rec.Tick != c.CountedTick {
		count(&c, rec.Tick, t, newRefusals)
		if err := writeCounters(countersPath, c); err != nil {
			return err
		}
	}
	fams := append(Families(rec, c, t, used, outbox), troubles(rec.EnvID, v, unanswered, t.Limits)...)
	fams = append(fams, newFamily(rec.EnvID, "monky_deployd_held", "1 while a person's hold lasts (monky-deployd hold): applies and heals wait until it ends.", dto.MetricType_GAUGE).
		add(map[bool]float64{true: 1, false: 0}[rec.Hold.Active(t.EndedAt)]).mf)
	sort.Slice(fams, func(i, j int) bool { return fams[i].GetName() < fams[j].GetName() })
	if err := writeTextfile(path, fams); err != nil {
		return fmt.Errorf("metrics: write %s: %w", path, err)
	}
	return nil
}

// refusalsOf is the codes of the refusals tick n committed.
func refusalsOf(tx store.Tx, n uint64) ([]string, error) {
	es, err := tx.Entries(n)
	if err != nil {
		return nil, err
	}
	var codes []string
	for _, e := range es {
		if e.To == string(machine.Refused) && e.From != e.To && e.Code != "" {
			codes = append(codes, string(e.Code))
		}
	}
	return codes, nil
}

// count counts tick n, which ended as t, and the refusals it committed, into c.
func count(c *Counters, n uint64, t Tick, newRefusals []string) {
	c.TicksByExit[strconv.Itoa(t.Exit)]++
	if t.Exit != 0 {
		code := t.Code
		if code == "" {
			code = NoCode
		}
		c.FailuresByCode[code]++
	}
	for _, code := range newRefusals {
		c.RefusalsByCode[code]++
	}
	c.CountedTick = n
}

// family is one metric family under construction; every sample carries env.
type family struct {
	env string
	mf  *dto.MetricFamily
}

func newFamily(env, name, help string, typ dto.MetricType) *family {
	return &family{env: env, mf: &dto.MetricFamily{Name: &name, Help: &help, Type: &typ}}
}

// add appends a sample with the label pairs kv (name, value, name, value …).
func (f *family) add(v float64, kv ...string) *family {
	m := &dto.Metric{Label: []*dto.LabelPair{label("env", f.env)}}
	for i := 0; i+1 < len(kv); i += 2 {
		m.Label = append(m.Label, label(kv[i], kv[i+1]))
	}
	sort.Slice(m.Label, func(i, j int) bool { return m.Label[i].GetName() < m.Label[j].GetName() })
	switch f.mf.GetType() {
	case dto.MetricType_COUNTER:
		m.Counter = &dto.Counter{Value: &v}
	default:
		m.Gauge = &dto.Gauge{Value: &v}
	}
	f.mf.Metric = append(f.mf.Metric, m)
	return f
}

func label(name, value string) *dto.LabelPair { return &dto.LabelPair{Name: &name, Value: &value} }

// tokenExpiry is when the box's token expires as status reads it: zero (no token) when there is
// none, or when the newest tick would not read the token file (untrusted), whatever the record
// knew of the token before.
func tokenExpiry(t store.TokenMeta) time.Time {
	if !t.Present || t.Untrusted != "" {
		return time.Time{}
	}
	return t.ExpiresAt
}

// Families are the metrics of one moment, sorted by name.
func Families(rec store.Record, c Counters, t Tick, leasesUsed, outbox int) []*dto.MetricFamily {
	env := rec.EnvID
	var out []*family
	gauge := func(name, help string, v float64) {
		out = append(out, newFamily(env, "monky_deployd_"+name, help, dto.MetricType_GAUGE).add(v))
	}
	out = append(out, infoFamilies(rec, t)...)

	gauge("last_tick_exit_code", "The exit code of the last tick (0, 1, 75 temporary, 78 env mismatch).", float64(t.Exit))
	gauge("last_tick_duration_seconds", "How long the last tick took.", t.Duration.Seconds())
	gauge("last_tick_timestamp_seconds", "When the last tick ended (unix time).", unix(t.EndedAt))
	gauge("tick_interval_seconds", "How often ticks run; the file is stale past three of these.", t.Interval.Seconds())
	gauge("last_checkin_timestamp_seconds", "When tenancy last answered a check-in (unix time; 0: never).", unix(rec.LastCheckinAt))
	gauge("lease_budget_used", "Leases asked in the rolling hour.", float64(leasesUsed))
	gauge("lease_budget_limit", "Leases tenancy allows per rolling hour.", float64(machine.LeaseLimit))
	gauge("token_expiry_timestamp_seconds", "When the OpenBao token expires (unix time; 0: no token).", unix(tokenExpiry(rec.Token)))
	gauge("outbox_reports", "Reports waiting in the outbox for tenancy's acknowledgement.", float64(outbox))
	gauge("containers_healthy", "Containers running and healthy (or running without a healthcheck) at the last check-in.", float64(healthyCount(rec.Containers)))
	gauge("containers", "Containers of the project at the last check-in.", float64(len(rec.Containers)))
	gauge("failed_attempts", "Failed attempts of the current flight.", float64(rec.TotalAttempts()))
	parked := 0.0
	if rec.Parked {
		parked = 1
	}
	gauge("parked", "1 when the failed flight is parked until resume or a new sha.", parked)

	counter := func(name, help, key string, m map[string]float64) {
		if len(m) == 0 {
			return // a family with no sample is no family
		}
		f := newFamily(env, "monky_deployd_"+name, help, dto.MetricType_COUNTER)
		for _, k := range slices.Sorted(maps.Keys(m)) {
			f.add(m[k], key, k)
		}
		out = append(out, f)
	}
	counter("ticks_total", "Ticks by exit code (kept in metrics.json beside the state file).", "exit", c.TicksByExit)
	counter("failures_total", "Ticks that did not end with exit 0, by the code they ended with (NONE: no code).", "code", c.FailuresByCode)
	counter("refusals_total", "Refusals by code (kept in metrics.json beside the state file).", "code", c.RefusalsByCode)

	fams := make([]*dto.MetricFamily, len(out))
	for i, f := range out {
		fams[i] = f.mf
	}
	sort.Slice(fams, func(i, j int) bool { return fams[i].GetName() < fams[j].GetName() })
	return fams
}

// infoFamilies are the families that say what the agent and the box are: the build, the
// machine's state and the applied and desired shas.
func infoFamilies(rec store.Record, t Tick) []*family {
	env := rec.EnvID
	version := t.Version
	if version == "" {
		version = "unknown"
	}
	build := newFamily(env, "monky_deployd_build_info", "The agent's build: its version and the transports it can dial with (1).", dto.MetricType_GAUGE).
		add(1, "version", version, "transports", strings.Join(t.Transports, ","))
	state := newFamily(env, "monky_deployd_state", "The machine's state: 1 for the current one.", dto.MetricType_GAUGE)
	cur := rec.State
	if cur == "" {
		cur = string(machine.Idle)
	}
	for _, s := range machine.All {
		v := 0.0
		if string(s) == cur {
			v = 1
		}
		state.add(v, "state", string(s))
	}
	info := newFamily(env, "monky_deployd_sha_info", "The applied and the desired bundle sha (1; kind=applied|desired).", dto.MetricType_GAUGE)
	info.add(1, "kind", "applied", "sha", rec.AppliedSha)
	info.add(1, "kind", "desired", "sha", rec.DesiredSha)
	return []*family{build, state, info}
}

// healthyCount is how many of cs run healthy, or run without a healthcheck.
func healthyCount(cs []store.Container) int {
	healthy := 0
	for _, ct := range cs {
		if ct.State == "running" && (ct.Health == "healthy" || ct.Health == "") {
			healthy++
		}
	}
	return healthy
}

// writeTextfile replaces path with the families in the text format: a temp file beside it,
// mode 0644 (node_exporter reads it as another user), renamed over the old one.
func writeTextfile(path string, fams []*dto.MetricFamily) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	w := bufio.NewWriter(f)
	for _, mf := range fams {
		if _, err := expfmt.MetricFamilyToText(w, mf); err != nil {
			f.Close()
			return err
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func unix(t time.Time) float64 {
	if t.IsZero() {
		return 0
	}
	return float64(t.UnixNano()) / 1e9
}

func readCounters(path string) (Counters, error) {
	c := Counters{TicksByExit: map[string]float64{}, FailuresByCode: map[string]float64{}, RefusalsByCode: map[string]float64{}}
	raw, err := files.ReadRegular(path) // a FIFO planted there is refused, not waited on
	if errors.Is(err, os.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return c, fmt.Errorf("metrics: counters: %w", err)
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		// A damaged counters file starts over: counters may reset, Prometheus copes.
		return Counters{TicksByExit: map[string]float64{}, FailuresByCode: map[string]float64{}, RefusalsByCode: map[string]float64{}}, nil
	}
	if c.TicksByExit == nil {
		c.TicksByExit = map[string]float64{}
	}
	if c.RefusalsByCode == nil {
		c.RefusalsByCode = map[string]float64{}
	}
	if c.FailuresByCode == nil {
		c.FailuresByCode = map[string]float64{}
	}
	return c, nil
}

// writeCounters replaces the counters file (files.WriteAtomic: temp file, fsync, rename, fsync
// the directory).
func writeCounters(path string, c Counters) error {
	raw, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("metrics: counters: %w", err)
	}
	if err := files.WriteAtomic(path, raw, 0o600); err != nil {
		return fmt.Errorf("metrics: counters: %w", err)
	}
	return nil
}

// troubles are the one verdict explain and status give: converged, needs a person, every
// active code; whether tenancy answered the last check-in asked; stale_after_s, which the
// alert rules compare the last tick's time with.
func troubles(env string, v explain.Verdict, unanswered bool, lim explain.Limits) []*dto.MetricFamily {
	b := func(x bool) float64 {
		if x {
			return 1
		}
		return 0
	}
	stale := lim.StaleAfter
	if stale <= 0 {
		stale = explain.DefaultStaleAfter
	}
	out := []*dto.MetricFamily{
		newFamily(env, "monky_deployd_converged", "1 when the box runs what tenancy wants and nothing is wrong (explain's verdict: converged).", dto.MetricType_GAUGE).add(b(v.Converged)).mf,
		newFamily(env, "monky_deployd_needs_person", "1 when the box needs a person (explain's verdict: needs_person; status exits 1).", dto.MetricType_GAUGE).add(b(v.NeedsPerson())).mf,
		newFamily(env, "monky_deployd_checkin_unanswered", "1 when the last tick asked tenancy for a check-in and got no answer.", dto.MetricType_GAUGE).add(b(unanswered)).mf,
		newFamily(env, "monky_deployd_stale_after_seconds", "stale_after_s: a last tick older than this needs a person (the timer is not running).", dto.MetricType_GAUGE).add(stale.Seconds()).mf,
	}
	if len(v.Codes) > 0 {
		f := newFamily(env, "monky_deployd_why", "1 for each code active on the box, as explain's why blocks name them.", dto.MetricType_GAUGE)
		for _, c := range v.Codes {
			f.add(1, "code", c)
		}
		out = append(out, f.mf)
	}
	if whys := v.Whys(); len(whys) > 0 {
		f := newFamily(env, "monky_deployd_why_reason", "1 for each active code that carries a typed cause, labelled with it (docs/JOURNAL.md, \"Reasons\").", dto.MetricType_GAUGE)
		for _, w := range whys {
			if w.Reason != "" {
				f.add(1, "code", string(w.Code), "reason", string(w.Reason))
			}
		}
		if len(f.mf.Metric) > 0 {
			out = append(out, f.mf)
		}
	}
	return out
}

// checkinUnanswered reports whether the newest tick asked tenancy for a check-in and got no
// answer (a checkin-failed note).
func checkinUnanswered(in explain.Input) bool {
	if len(in.Recent) == 0 {
		return false
	}
	for _, e := range in.Entries[in.Recent[len(in.Recent)-1].Tick] {
		if e.Event == machine.NoteCheckinFailed {
			return true
		}
	}
	return false
}
