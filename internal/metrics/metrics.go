// Package metrics writes the agent's state, after every tick, as a node_exporter textfile
// collector file (`metrics_path`), so a fleet can alert on boxes that stopped checking in, stay
// refused, or hold a token about to expire.
//
// It reads the state file and a small counters file beside it; it never dials out, never sees
// a secret (the store holds none), and uses its own registry, never the global one. Counters
// that must survive the journal's folding and pruning (ticks by exit code, refusals by code)
// are kept in `<state_dir>/metrics.json`, replaced atomically each tick.
package metrics

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tikali/monky-deployd/internal/explain"
	"github.com/tikali/monky-deployd/machine"
	"github.com/tikali/monky-deployd/store"
)

// CountersFile is the name of the counters file in the state directory.
const CountersFile = "metrics.json"

// Tick is what the caller knows of the tick that just ended.
type Tick struct {
	Exit     int
	Duration time.Duration
	EndedAt  time.Time
}

// Counters are the totals the textfile carries across ticks.
type Counters struct {
	TicksByExit    map[string]float64 `json:"ticks_by_exit"`
	RefusalsByCode map[string]float64 `json:"refusals_by_code"`
	// CountedTick is the last tick counted, so a second write for the same tick adds nothing.
	CountedTick uint64 `json:"counted_tick"`
}

// Write counts the tick, then writes the textfile at path from the state file and the tick.
// countersPath is the counters file (see CountersFile).
func Write(path, countersPath string, st store.Store, t Tick) error {
	var rec store.Record
	var newRefusals []string
	var used int
	var outbox int
	var v explain.Verdict
	err := st.View(func(tx store.Tx) error {
		var err error
		if rec, err = tx.Record(); err != nil {
			return err
		}
		in, err := explain.Read(tx, t.EndedAt)
		if err != nil {
			return err
		}
		v = explain.Decide(in)
		es, err := tx.Entries(rec.Tick)
		if err != nil {
			return err
		}
		for _, e := range es {
			if e.To == string(machine.Refused) && e.From != e.To && e.Code != "" {
				newRefusals = append(newRefusals, e.Code)
			}
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
		c.TicksByExit[strconv.Itoa(t.Exit)]++
		for _, code := range newRefusals {
			c.RefusalsByCode[code]++
		}
		c.CountedTick = rec.Tick
		if err := writeCounters(countersPath, c); err != nil {
			return err
		}
	}
	reg := Registry(rec, c, t, used, outbox)
	troubles(reg, rec.EnvID, v)
	if err := prometheus.WriteToTextfile(path, reg); err != nil {
		return fmt.Errorf("metrics: write %s: %w", path, err)
	}
	return nil
}

// Registry builds the metrics of one moment on a fresh registry.
func Registry(rec store.Record, c Counters, t Tick, leasesUsed, outbox int) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	env := rec.EnvID
	r := prometheus.WrapRegistererWith(prometheus.Labels{"env": env}, reg)
	gauge := func(name, help string, v float64) {
		g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "monky_deployd_" + name, Help: help})
		g.Set(v)
		r.MustRegister(g)
	}
	state := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "monky_deployd_state", Help: "The machine's state: 1 for the current one."}, []string{"state"})
	cur := rec.State
	if cur == "" {
		cur = string(machine.Idle)
	}
	for _, s := range machine.All {
		v := 0.0
		if string(s) == cur {
			v = 1
		}
		state.WithLabelValues(string(s)).Set(v)
	}
	r.MustRegister(state)
	info := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "monky_deployd_sha_info", Help: "The applied and the desired bundle sha (1; kind=applied|desired)."}, []string{"kind", "sha"})
	info.WithLabelValues("applied", rec.AppliedSha).Set(1)
	info.WithLabelValues("desired", rec.DesiredSha).Set(1)
	r.MustRegister(info)

	gauge("last_tick_exit_code", "The exit code of the last tick (0, 1, 75 temporary, 78 env mismatch).", float64(t.Exit))
	gauge("last_tick_duration_seconds", "How long the last tick took.", t.Duration.Seconds())
	gauge("last_tick_timestamp_seconds", "When the last tick ended (unix time).", unix(t.EndedAt))
	gauge("last_checkin_timestamp_seconds", "When tenancy last answered a check-in (unix time; 0: never).", unix(rec.LastCheckinAt))
	gauge("lease_budget_used", "Leases asked in the rolling hour.", float64(leasesUsed))
	gauge("lease_budget_limit", "Leases tenancy allows per rolling hour.", float64(machine.LeaseLimit))
	gauge("token_expiry_timestamp_seconds", "When the OpenBao token expires (unix time; 0: no token).", unix(rec.Token.ExpiresAt))
	gauge("outbox_reports", "Reports waiting in the outbox for tenancy's acknowledgement.", float64(outbox))
	healthy := 0
	for _, ct := range rec.Containers {
		if ct.State == "running" && (ct.Health == "healthy" || ct.Health == "") {
			healthy++
		}
	}
	gauge("containers_healthy", "Containers running and healthy (or running without a healthcheck) at the last check-in.", float64(healthy))
	gauge("containers_total", "Containers of the project at the last check-in.", float64(len(rec.Containers)))
	gauge("failed_attempts", "Failed attempts of the current flight.", float64(rec.TotalAttempts()))
	parked := 0.0
	if rec.Parked {
		parked = 1
	}
	gauge("parked", "1 when the failed flight is parked until resume or a new sha.", parked)

	ticks := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "monky_deployd_ticks_total", Help: "Ticks by exit code (kept in metrics.json beside the state file)."}, []string{"exit"})
	for _, k := range sortedKeys(c.TicksByExit) {
		ticks.WithLabelValues(k).Add(c.TicksByExit[k])
	}
	r.MustRegister(ticks)
	ref := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "monky_deployd_refusals_total", Help: "Refusals by code (kept in metrics.json beside the state file)."}, []string{"code"})
	for _, k := range sortedKeys(c.RefusalsByCode) {
		ref.WithLabelValues(k).Add(c.RefusalsByCode[k])
	}
	r.MustRegister(ref)
	return reg
}

func unix(t time.Time) float64 {
	if t.IsZero() {
		return 0
	}
	return float64(t.UnixNano()) / 1e9
}

func sortedKeys(m map[string]float64) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func readCounters(path string) (Counters, error) {
	c := Counters{TicksByExit: map[string]float64{}, RefusalsByCode: map[string]float64{}}
	raw, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return c, fmt.Errorf("metrics: counters: %w", err)
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		// A damaged counters file starts over: counters may reset, Prometheus copes.
		return Counters{TicksByExit: map[string]float64{}, RefusalsByCode: map[string]float64{}}, nil
	}
	if c.TicksByExit == nil {
		c.TicksByExit = map[string]float64{}
	}
	if c.RefusalsByCode == nil {
		c.RefusalsByCode = map[string]float64{}
	}
	return c, nil
}

// writeCounters replaces the counters file: temp file, fsync, rename, fsync the directory.
func writeCounters(path string, c Counters) error {
	raw, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("metrics: counters: %w", err)
	}
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("metrics: counters: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	if _, err := f.Write(raw); err != nil {
		f.Close()
		return fmt.Errorf("metrics: counters: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("metrics: counters: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("metrics: counters: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("metrics: counters: %w", err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("metrics: counters: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("metrics: counters: %w", err)
	}
	return nil
}

// troubles adds the verdict explain and status give: converged or not, and the code of the
// one thing wrong — from the same function, so an alert and `explain` never disagree.
func troubles(reg *prometheus.Registry, env string, v explain.Verdict) {
	r := prometheus.WrapRegistererWith(prometheus.Labels{"env": env}, reg)
	conv := prometheus.NewGauge(prometheus.GaugeOpts{Name: "monky_deployd_converged", Help: "1 when the box runs what tenancy wants and nothing is wrong (explain's next reads converged)."})
	if v.Converged {
		conv.Set(1)
	}
	r.MustRegister(conv)
	why := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "monky_deployd_why", Help: "1 for the code of explain's why block: the one thing between the box and tenancy's desired sha."}, []string{"code"})
	if v.Why != nil {
		why.WithLabelValues(v.Why.Code).Set(1)
	}
	r.MustRegister(why)
}
