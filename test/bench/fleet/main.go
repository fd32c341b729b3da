// Command fleet runs many agents in loop mode, in process, against one simulator running as a
// child process on loopback, each agent with its own state dir, and measures what the control
// plane sees: check-ins per second, how the check-ins of a fleet started at once spread over
// the interval (without and with the loop's randomized delay), how long that takes to settle,
// check-in latency, and the CPU of the agents (this process) and of the simulator (the child).
// Compose is in process (each box runs its own docker; the per-box exec cost is measured by
// test/bench/bench.sh). It is a measurement program: it changes nothing outside -dir (and
// -result) and listens on 127.0.0.1 only. It raises its own RLIMIT_NOFILE (the simulator, its
// child, inherits it): 10,000 agents keep 10,000 connections open, and the simulator as many.
//
// It injects faults into a known few (-faults, in percent of the fleet, each kind on its own
// agents): a service turning unhealthy after the first apply, a token OpenBao refuses for the
// env's secrets (403 permission denied on its KV paths), a privileged bundle. It ends with the
// simulator's fleet table (the control plane's view, from each env's last report and its why)
// and fails unless the count per code is exactly what was injected, with no healthy box listed.
//
//	go run ./test/bench/fleet [-n 10000] [-interval 60s] [-duration 180s] [-phases splay]
//	    [-faults 1] [-dir /dev/shm/monky-bench-fleet] [-result FILE.json]
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/tikali/monky-deployd/effects/bao"
	"github.com/tikali/monky-deployd/effects/tenancy"
	"github.com/tikali/monky-deployd/internal/config"
	"github.com/tikali/monky-deployd/internal/vocab"
	"github.com/tikali/monky-deployd/states"
	"github.com/tikali/monky-deployd/store"
	"github.com/tikali/monky-deployd/test/bench/rig"
	"github.com/tikali/monky-deployd/test/sim"
	"github.com/tikali/monky-deployd/transport"
)

func main() {
	var err error
	if len(os.Args) > 1 && os.Args[1] == "serve-sim" {
		err = serveSim(os.Args[2:])
	} else {
		err = run()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "fleet:", err)
		os.Exit(1)
	}
}

func envID(i int) string { return fmt.Sprintf("env-fleet-%04d", i) }

// The faults injected, each into the agents whose index i has i%stride == its slot (stride =
// 100/percent, so percent % of the fleet each), and the code the fleet table must show for them.
const (
	slotUnhealthy  = 1
	slotBaoRefuses = 2
	slotPrivileged = 3
)

var faultCodes = map[int]string{slotUnhealthy: string(vocab.Unhealthy), slotBaoRefuses: string(vocab.BaoPermissionDenied), slotPrivileged: string(vocab.PrivilegedRefused)}

// faultOf is the fault injected into agent i (0: none).
func faultOf(i, percent int) int {
	if percent <= 0 {
		return 0
	}
	stride := max(100/percent, 4)
	if f := i % stride; f >= slotUnhealthy && f <= slotPrivileged {
		return f
	}
	return 0
}

// serveSim is the child: one simulator with n envs, each with a release desired and a kit.
func serveSim(args []string) error {
	fs := flag.NewFlagSet("serve-sim", flag.ContinueOnError)
	n := fs.Int("n", 10000, "envs")
	dir := fs.String("dir", "", "kits go to DIR/kits/<env>, state dirs DIR/state/<env>")
	interval := fs.Int("interval", 20, "checkin_interval_s")
	faults := fs.Int("faults", 0, "percent of the fleet per kind of fault")
	if err := fs.Parse(args); err != nil {
		return err
	}
	s, err := sim.New(sim.Options{})
	if err != nil {
		return err
	}
	s.SetCheckinInterval(*interval)
	lt, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	lb, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	tURL, bURL := "http://"+lt.Addr().String(), "http://"+lb.Addr().String()
	s.SetBaoAddr(bURL)
	s.SetTenancyAddr(tURL)
	for i := 0; i < *n; i++ {
		e := envID(i)
		s.AddEnv(e)
		s.PutSecret(e, "gemini", map[string]string{"value": "fleet-gemini"})
		s.PutSecret(e, "db", map[string]string{"password": "fleet-db"})
		files := rig.Backend(e, "v1")
		switch faultOf(i, *faults) {
		case slotPrivileged:
			files["compose.yaml"] = []byte(strings.Replace(string(files["compose.yaml"]), "  api:\n", "  api:\n    privileged: true\n", 1))
		case slotBaoRefuses:
			s.Fail(sim.FailRule{Path: "/v1/monky/data/" + e + "/", Status: http.StatusForbidden, Message: "permission denied"})
		}
		sha, err := s.AddRelease(e, "v1", files)
		if err != nil {
			return err
		}
		if err := s.SetDesired(e, sha); err != nil {
			return err
		}
		st := filepath.Join(*dir, "state", e)
		if err := s.WriteKit(filepath.Join(*dir, "kits", e), sim.Kit{EnvID: e, TenancyURL: tURL, BaoURL: bURL,
			StateDir: st, DeployDir: filepath.Join(st, "deploy"), DockerBin: "/bin/false"}); err != nil {
			return err
		}
	}
	go func() {
		_ = (&http.Server{Handler: s.TenancyHandler(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Duration(*interval) * time.Second}).Serve(lt)
	}()
	go func() { _ = (&http.Server{Handler: s.BaoHandler(), ReadHeaderTimeout: 10 * time.Second}).Serve(lb) }()
	la, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	go func() { _ = (&http.Server{Handler: s.AdminHandler(), ReadHeaderTimeout: 10 * time.Second}).Serve(la) }()
	if err := sim.WriteFileAtomic(filepath.Join(*dir, "admin"), []byte("http://"+la.Addr().String()), 0o600); err != nil {
		return err
	}
	if err := sim.WriteFileAtomic(filepath.Join(*dir, "ready"), []byte(tURL+"\n"), 0o600); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	<-ctx.Done()
	return nil
}

type agent struct {
	a       *states.Agent
	compose *rig.Compose
	waits   *rig.Waits
	bao     *http.Client // closed idle after the first apply: heartbeats do not call OpenBao
}

func run() error {
	n := flag.Int("n", 10000, "agents")
	interval := flag.Duration("interval", 60*time.Second, "checkin_interval_s the simulator answers")
	duration := flag.Duration("duration", 180*time.Second, "how long each loop phase runs (the first interval is the restart)")
	dir := flag.String("dir", rig.ScratchDir("monky-bench-fleet"), "working directory (removed first)")
	phases := flag.String("phases", "splay", "loop phases to run: splay (the command's loop: a random part of the interval first, then the interval ±10 %), none (no delay)")
	result := flag.String("result", "", "write the figures of the last phase to FILE as JSON (make bench reads it)")
	workers := flag.Int("workers", 8, "agents converging at once")
	faults := flag.Int("faults", 1, "percent of the fleet per kind of fault (unhealthy, OpenBao refuses, privileged); 0: none")
	flag.Parse()
	if err := raiseNoFile(uint64(4**n + 1024)); err != nil {
		return err
	}
	if err := os.RemoveAll(*dir); err != nil {
		return err
	}
	if err := os.MkdirAll(*dir, 0o700); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	child := exec.Command(self, "serve-sim", "-n", strconv.Itoa(*n), "-dir", *dir, "-interval", strconv.Itoa(int(interval.Seconds())), "-faults", strconv.Itoa(*faults))
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		return err
	}
	defer func() { _ = child.Process.Signal(syscall.SIGTERM); _ = child.Wait() }()
	for deadline := time.Now().Add(5 * time.Minute); ; { // 10,000 kits and releases: a minute on a quiet machine
		if _, err := os.Stat(filepath.Join(*dir, "ready")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			return errors.New("simulator not ready within 5 min")
		}
		time.Sleep(50 * time.Millisecond)
	}
	agents := make([]*agent, *n)
	for i := range agents {
		if agents[i], err = newAgent(filepath.Join(*dir, "kits", envID(i), "config.yaml")); err != nil {
			return err
		}
	}
	fmt.Printf("fleet: %d agents in process, simulator pid %d on loopback, checkin_interval_s %d, state dirs under %s\n",
		*n, child.Process.Pid, int(interval.Seconds()), *dir)

	// Converge: every agent applies v1 (login, lease, bundle, secrets), 8 at a time.
	cpu0, sim0 := selfCPU(), procCPU(child.Process.Pid)
	t0 := time.Now()
	var fails atomic.Int64
	work := make(chan *agent)
	var wg sync.WaitGroup
	for w := 0; w < *workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ag := range work {
				if res := ag.a.Tick(context.Background()); res.Exit != 0 {
					if fails.Add(1) == 1 {
						fmt.Printf("fleet: first failed apply: exit %d: %v\n", res.Exit, res.Err)
					}
				}
				ag.bao.CloseIdleConnections() // heartbeats do not call OpenBao; the fds are few
			}
		}()
	}
	for _, ag := range agents {
		work <- ag
	}
	close(work)
	wg.Wait()
	el := time.Since(t0)
	fmt.Printf("fleet: first apply of %d agents: %s wall (%.0f applies/s), %d failed; CPU agents %s (%.1f ms/apply), simulator %s\n",
		*n, el.Round(time.Millisecond), float64(*n)/el.Seconds(), fails.Load(), (selfCPU() - cpu0).Round(time.Millisecond),
		float64((selfCPU()-cpu0).Microseconds())/1000/float64(*n), (procCPU(child.Process.Pid) - sim0).Round(time.Millisecond))

	// the unhealthy fault: a service of these boxes turns unhealthy after their apply
	for i, ag := range agents {
		if faultOf(i, *faults) == slotUnhealthy {
			ag.compose.SetUnhealthy(true)
		}
	}
	for _, ph := range strings.Split(*phases, ",") {
		fig, err := phase(ph, agents, *interval, *duration, child.Process.Pid)
		if err != nil {
			return err
		}
		fig.ApplyS, fig.ApplyFailed = el.Seconds(), int(fails.Load())
		if *result != "" {
			raw, _ := json.MarshalIndent(fig, "", "  ")
			if err := os.WriteFile(*result, raw, 0o644); err != nil {
				return err
			}
		}
	}
	return fleetTable(*dir, *n, *faults)
}

// fleetTable prints the simulator's fleet table — every env its last report names a code for —
// and fails unless the count per code is exactly what was injected.
func fleetTable(dir string, n, faults int) error {
	admin, err := os.ReadFile(filepath.Join(dir, "admin"))
	if err != nil {
		return err
	}
	resp, err := http.Get(string(admin) + "/admin/fleet?all=1")
	if err != nil {
		return fmt.Errorf("fleet table: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	var rows []sim.FleetRow
	if err := json.NewDecoder(resp.Body).Decode(&rows); err != nil {
		return fmt.Errorf("fleet table: %w", err)
	}
	want := map[string]int{}
	for i := 0; i < n; i++ {
		if f := faultOf(i, faults); f != 0 {
			want[faultCodes[f]]++
		}
	}
	got, listed := map[string]int{}, []sim.FleetRow{}
	converged := 0
	for _, r := range rows {
		switch {
		case r.Code != "":
			got[r.Code]++
			listed = append(listed, r)
		case r.Verdict == sim.VerdictConverged:
			converged++
		}
	}
	fmt.Printf("fleet table (monky-sim fleet): the %d envs whose last report names a code\n", len(listed))
	sim.WriteFleet(os.Stdout, listed)
	var bad []string
	for code, w := range want {
		if got[code] != w {
			bad = append(bad, fmt.Sprintf("%s: %d listed, %d injected", code, got[code], w))
		}
	}
	for code, g := range got {
		if want[code] == 0 {
			bad = append(bad, fmt.Sprintf("%s: %d listed, none injected", code, g))
		}
	}
	injected := 0
	for _, w := range want {
		injected += w
	}
	if converged != n-injected {
		bad = append(bad, fmt.Sprintf("%d converged, want %d", converged, n-injected))
	}
	sort.Strings(bad)
	if len(bad) > 0 {
		return fmt.Errorf("the fleet table does not match the injected faults: %s", strings.Join(bad, "; "))
	}
	fmt.Printf("fleet: the table matches the injected faults exactly (%v), %d converged, no healthy box listed\n", want, converged)
	return nil
}

// raiseNoFile raises RLIMIT_NOFILE to at least want (as far as the hard limit allows, or
// beyond it as root).
func raiseNoFile(want uint64) error {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return err
	}
	if lim.Cur >= want {
		return nil
	}
	if lim.Max < want {
		try := syscall.Rlimit{Cur: want, Max: want}
		if syscall.Setrlimit(syscall.RLIMIT_NOFILE, &try) == nil {
			return nil
		}
	}
	lim.Cur = min(want, lim.Max)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return fmt.Errorf("RLIMIT_NOFILE: %w", err)
	}
	if lim.Cur < want {
		fmt.Printf("fleet: RLIMIT_NOFILE %d (wanted %d; the hard limit)\n", lim.Cur, want)
	}
	return nil
}

// newAgent wires an agent as the command does (transport, HTTP clients, tenancy, OpenBao),
// with the in-process compose.
func newAgent(cfgPath string) (*agent, error) {
	cfg, err := config.Load(cfgPath)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.StateDir, 0o700); err != nil {
		return nil, err
	}
	st, err := store.OpenBolt(cfg.StatePath(), store.BoltOptions{})
	if err != nil {
		return nil, err
	}
	d, err := transport.New(transport.FromConfig(cfg))
	if err != nil {
		return nil, err
	}
	thc, err := transport.HTTPClient(d, cfg.Tenancy.Service, "", cfg.TenancyTimeout())
	if err != nil {
		return nil, err
	}
	bhc, err := transport.HTTPClient(d, "bao", "", cfg.BaoTimeout())
	if err != nil {
		return nil, err
	}
	bc, err := bao.New(cfg.Bao.Addr, bhc, cfg.BaoTimeout())
	if err != nil {
		return nil, err
	}
	w := &rig.Waits{}
	c := &rig.Compose{}
	fx := states.Effects{Tenancy: tenancy.New(cfg.TenancyBaseURL(), thc, d.Name(), time.Now), Bao: bc, Compose: c, Disk: rig.Disk{}}
	return &agent{waits: w, bao: bhc, compose: c, a: &states.Agent{Cfg: cfg, Store: st, Log: zerolog.New(io.Discard), Host: cfg.EnvID, Version: "0.0.0-fleet",
		Fx: w.Wrap(fx), ContainerdRoots: []string{}}}, nil
}

// loop is the command's loop (cmd/monky-deployd loop): tick, then wait tenancy's interval.
// With splay it first waits a uniformly random part of the interval and then the interval
// ±10 %: the randomized delay proposed for loop mode.
func loop(ag *agent, stop chan struct{}, fallback time.Duration, splay bool) {
	ag.a.Stop = stop
	wait := func(d time.Duration) bool {
		select {
		case <-stop:
			return false
		case <-time.After(d):
			return true
		}
	}
	if splay && !wait(rand.N(fallback)) {
		return
	}
	for {
		res := ag.a.Tick(context.Background())
		interval := fallback
		if res.IntervalS > 0 {
			interval = time.Duration(res.IntervalS) * time.Second
		}
		if splay {
			interval += time.Duration((rand.Float64()*0.2 - 0.1) * float64(interval))
		}
		if !wait(max(interval, time.Second)) {
			return
		}
	}
}

// figures are what a phase measured (and what make bench reads).
type figures struct {
	Agents        int     `json:"agents"`
	IntervalS     float64 `json:"interval_s"`
	Phase         string  `json:"phase"`
	DurationS     float64 `json:"duration_s"`
	Checkins      int     `json:"checkins"`
	Errors        int     `json:"errors"`
	IdealPerS     float64 `json:"ideal_per_s"`
	SustainedPerS float64 `json:"sustained_per_s"` // after the first interval (the restart)
	PeakSettled   int     `json:"peak_settled"`    // busiest second after the first interval
	PeakRestart   int     `json:"peak_restart"`    // busiest second of the first interval
	SettleS       int     `json:"settle_s"`        // from the restart until every second stays within 2× the mean
	FirstRoundS   float64 `json:"first_round_s"`   // all agents had checked in once after this
	LatP50Ms      float64 `json:"latency_p50_ms"`
	LatP99Ms      float64 `json:"latency_p99_ms"`
	LatMaxMs      float64 `json:"latency_max_ms"`
	AgentCPUMs    float64 `json:"agent_cpu_ms_per_checkin"`
	SimCPUMs      float64 `json:"sim_cpu_ms_per_checkin"`
	AgentCores    float64 `json:"agent_cores"`
	SimCores      float64 `json:"sim_cores"`
	MaxRSSMiB     float64 `json:"agents_max_rss_mib"`
	Load1         string  `json:"loadavg"`
	ApplyS        float64 `json:"first_apply_s"`
	ApplyFailed   int     `json:"first_apply_failed"`
}

// phase starts every agent's loop at once (a fleet-wide restart) and runs them for duration.
func phase(name string, agents []*agent, interval, duration time.Duration, simPid int) (figures, error) {
	splay := false
	switch name {
	case "none":
	case "splay":
		splay = true
	default:
		return figures{}, fmt.Errorf("unknown phase %q", name)
	}
	var mu sync.Mutex
	var sent []time.Duration
	var lat []time.Duration
	var errs int
	start := time.Now()
	for _, ag := range agents {
		ag.waits.OnCheckin = func(at time.Time, took time.Duration, err error) {
			mu.Lock()
			sent = append(sent, at.Sub(start))
			lat = append(lat, took)
			if err != nil {
				errs++
			}
			mu.Unlock()
		}
	}
	cpu0, sim0 := selfCPU(), procCPU(simPid)
	var cpuSettled, simSettled time.Duration
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, ag := range agents {
		wg.Add(1)
		go func() { defer wg.Done(); loop(ag, stop, interval, splay) }()
	}
	// CPU is counted after the first interval too, over the settled part alone
	settledAt := min(interval, duration)
	time.Sleep(settledAt)
	cpu1, sim1 := selfCPU(), procCPU(simPid)
	mu.Lock()
	nSettled0 := len(sent)
	mu.Unlock()
	time.Sleep(duration - settledAt)
	cpuSettled, simSettled = selfCPU()-cpu1, procCPU(simPid)-sim1
	mu.Lock()
	nSettled := len(sent) - nSettled0
	mu.Unlock()
	close(stop)
	wg.Wait()
	el := time.Since(start)
	cpu, simCPU := selfCPU()-cpu0, procCPU(simPid)-sim0
	for _, ag := range agents {
		ag.waits.OnCheckin = nil
	}
	sort.Slice(sent, func(i, j int) bool { return sent[i] < sent[j] })
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	secs := int(duration / time.Second)
	hist := make([]int, secs)
	for _, s := range sent {
		if k := int(s / time.Second); k < secs {
			hist[k]++
		}
	}
	n := len(agents)
	mean := float64(n) / interval.Seconds()
	f := figures{Agents: n, IntervalS: interval.Seconds(), Phase: name, DurationS: el.Seconds(), Checkins: len(sent), Errors: errs, IdealPerS: mean}
	first := int(settledAt / time.Second)
	for k, c := range hist {
		if k < first {
			f.PeakRestart = max(f.PeakRestart, c)
		} else {
			f.PeakSettled = max(f.PeakSettled, c)
		}
	}
	// settled: from this second on, no second holds more than 2× the mean
	f.SettleS = secs
	for k := secs - 1; k >= 0 && float64(hist[k]) <= 2*mean; k-- {
		f.SettleS = k
	}
	if len(sent) >= n {
		f.FirstRoundS = sent[n-1].Seconds()
	}
	if d := (duration - settledAt).Seconds(); d > 0 {
		f.SustainedPerS = float64(nSettled) / d
		f.AgentCores, f.SimCores = cpuSettled.Seconds()/d, simSettled.Seconds()/d
	}
	if nSettled > 0 {
		f.AgentCPUMs, f.SimCPUMs = ms(cpuSettled)/float64(nSettled), ms(simSettled)/float64(nSettled)
	}
	if len(lat) > 0 {
		f.LatP50Ms, f.LatP99Ms, f.LatMaxMs = ms(lat[len(lat)/2]), ms(lat[len(lat)*99/100]), ms(lat[len(lat)-1])
	}
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	f.MaxRSSMiB = float64(ru.Maxrss) / 1024
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		f.Load1 = strings.Join(strings.Fields(string(b))[:3], " ")
	}

	label := "no randomized delay: every agent ticks at once, then every interval"
	if splay {
		label = "the command's loop: U[0,interval) first, then interval ±10 %"
	}
	fmt.Printf("fleet [%s]: %d agents restarted at once; %s\n", name, n, label)
	fmt.Printf("  %d check-ins in %s, %d errors; after the first interval: %.1f/s sustained (ideal %.1f/s)\n",
		len(sent), el.Round(time.Millisecond), errs, f.SustainedPerS, mean)
	fmt.Printf("  first round: all %d checked in within %.1f s; busiest second %d (%.2f× the mean) during it, %d (%.2f× the mean) after it\n",
		n, f.FirstRoundS, f.PeakRestart, float64(f.PeakRestart)/mean, f.PeakSettled, float64(f.PeakSettled)/mean)
	fmt.Printf("  settled (every later second within 2× the mean) %d s after the restart\n", f.SettleS)
	fmt.Printf("  check-in latency: p50 %.1f ms, p99 %.1f ms, max %.1f ms\n", f.LatP50Ms, f.LatP99Ms, f.LatMaxMs)
	fmt.Printf("  CPU after the first interval: agents %.2f ms per check-in (%.2f cores), simulator %.2f ms per check-in (%.2f cores); whole phase: agents %s, simulator %s\n",
		f.AgentCPUMs, f.AgentCores, f.SimCPUMs, f.SimCores, cpu.Round(time.Millisecond), simCPU.Round(time.Millisecond))
	fmt.Printf("  agents' process peak RSS %.0f MiB; load average %s\n", f.MaxRSSMiB, f.Load1)
	raw, _ := json.Marshal(hist)
	fmt.Printf("  check-ins per second: %s\n", raw)
	return f, nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func selfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return tv(ru.Utime) + tv(ru.Stime)
}

func tv(t syscall.Timeval) time.Duration {
	return time.Duration(t.Sec)*time.Second + time.Duration(t.Usec)*time.Microsecond
}

// procCPU is a process's user+system time from /proc (clock ticks of 10 ms).
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	k, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+k) * 10 * time.Millisecond
}
