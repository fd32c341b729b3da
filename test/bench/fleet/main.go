// Command fleet runs many agents in loop mode, in process, against one simulator running as a
// child process on loopback, each agent with its own state dir, and measures what the control
// plane sees: check-ins per second, how the check-ins of a fleet started at once spread over
// the interval (without and with a randomized delay), check-in latency, and the CPU of the
// agents (this process) and of the simulator (the child). Compose is in process (each box runs
// its own docker; the per-box exec cost is measured by scripts/bench.sh). It is a measurement
// program: it changes nothing outside -dir and listens on 127.0.0.1 only.
//
//	go run ./bench/fleet [-n 1000] [-interval 20s] [-duration 60s] [-dir /dev/shm/monky-fleet]
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
	"github.com/tikali/monky-deployd/internal/sim"
	"github.com/tikali/monky-deployd/states"
	"github.com/tikali/monky-deployd/store"
	"github.com/tikali/monky-deployd/test/bench/rig"
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

// serveSim is the child: one simulator with n envs, each with a release desired and a kit.
func serveSim(args []string) error {
	fs := flag.NewFlagSet("serve-sim", flag.ContinueOnError)
	n := fs.Int("n", 1000, "envs")
	dir := fs.String("dir", "", "kits go to DIR/kits/<env>, state dirs DIR/state/<env>")
	interval := fs.Int("interval", 20, "checkin_interval_s")
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
		sha, err := s.AddRelease(e, "v1", rig.Backend(e, "v1"))
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
	go func() { _ = (&http.Server{Handler: s.TenancyHandler(), ReadHeaderTimeout: 10 * time.Second}).Serve(lt) }()
	go func() { _ = (&http.Server{Handler: s.BaoHandler(), ReadHeaderTimeout: 10 * time.Second}).Serve(lb) }()
	if err := sim.WriteFileAtomic(filepath.Join(*dir, "ready"), []byte(tURL+"\n"), 0o600); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	<-ctx.Done()
	return nil
}

type agent struct {
	a     *states.Agent
	waits *rig.Waits
}

func defaultDir() string {
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		return "/dev/shm/monky-bench-fleet"
	}
	return filepath.Join(os.TempDir(), "monky-bench-fleet")
}

func run() error {
	n := flag.Int("n", 1000, "agents")
	interval := flag.Duration("interval", 20*time.Second, "checkin_interval_s the simulator answers")
	duration := flag.Duration("duration", 60*time.Second, "how long each loop phase runs")
	dir := flag.String("dir", defaultDir(), "working directory (removed first)")
	phases := flag.String("phases", "none,splay", "loop phases to run: none (today's loop), splay (the proposed randomized delay)")
	flag.Parse()
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
	child := exec.Command(self, "serve-sim", "-n", strconv.Itoa(*n), "-dir", *dir, "-interval", strconv.Itoa(int(interval.Seconds())))
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		return err
	}
	defer func() { _ = child.Process.Signal(syscall.SIGTERM); _ = child.Wait() }()
	for deadline := time.Now().Add(60 * time.Second); ; {
		if _, err := os.Stat(filepath.Join(*dir, "ready")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			return errors.New("simulator not ready within 60 s")
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
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ag := range work {
				if res := ag.a.Tick(context.Background()); res.Exit != 0 {
					if fails.Add(1) == 1 {
						fmt.Printf("fleet: first failed apply: exit %d: %v\n", res.Exit, res.Err)
					}
				}
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

	for _, ph := range strings.Split(*phases, ",") {
		if err := phase(ph, agents, *interval, *duration, child.Process.Pid); err != nil {
			return err
		}
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
	d, err := transport.New(cfg)
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
	fx := states.Effects{Tenancy: tenancy.New(cfg.TenancyBaseURL(), thc, d.Name(), time.Now), Bao: bc, Compose: &rig.Compose{}, Disk: rig.Disk{}}
	return &agent{waits: w, a: &states.Agent{Cfg: cfg, Store: st, Log: zerolog.New(io.Discard), Host: cfg.EnvID, Version: "0.0.0-fleet",
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

func phase(name string, agents []*agent, interval, duration time.Duration, simPid int) error {
	splay := false
	switch name {
	case "none":
	case "splay":
		splay = true
	default:
		return fmt.Errorf("unknown phase %q", name)
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
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, ag := range agents {
		wg.Add(1)
		go func() { defer wg.Done(); loop(ag, stop, interval, splay) }()
	}
	time.Sleep(duration)
	close(stop)
	wg.Wait()
	el := time.Since(start)
	cpu, simCPU := selfCPU()-cpu0, procCPU(simPid)-sim0
	for _, ag := range agents {
		ag.waits.OnCheckin = nil
	}
	sort.Slice(sent, func(i, j int) bool { return sent[i] < sent[j] })
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	perSec := map[int]int{}
	peak := 0
	for _, s := range sent {
		k := int(s / time.Second)
		perSec[k]++
		peak = max(peak, perSec[k])
	}
	label := "today's loop (no randomized delay)"
	if splay {
		label = "with splay U[0,interval) then interval ±10%"
	}
	n := len(agents)
	fmt.Printf("fleet [%s]: %s\n", name, label)
	fmt.Printf("  %d check-ins in %s: %.1f/s sustained (ideal %.1f/s), %d errors\n",
		len(sent), el.Round(time.Millisecond), float64(len(sent))/el.Seconds(), float64(n)/interval.Seconds(), errs)
	if len(sent) >= n {
		first := sent[:n]
		fmt.Printf("  first round: %d check-ins sent between +%s and +%s (p50 +%s, p99 +%s)\n", n,
			first[0].Round(time.Millisecond), first[n-1].Round(time.Millisecond), first[n/2].Round(time.Millisecond), first[n*99/100].Round(time.Millisecond))
	}
	fmt.Printf("  busiest second: %d check-ins (%.0f× the mean of %.1f/s)\n", peak, float64(peak)/(float64(n)/interval.Seconds()), float64(n)/interval.Seconds())
	if len(lat) > 0 {
		fmt.Printf("  check-in latency: p50 %s, p99 %s, max %s\n", lat[len(lat)/2].Round(time.Microsecond), lat[len(lat)*99/100].Round(time.Microsecond), lat[len(lat)-1].Round(time.Microsecond))
	}
	fmt.Printf("  CPU: agents %s (%.2f ms per check-in, %.1f%% of one core), simulator %s (%.2f ms per check-in)\n",
		cpu.Round(time.Millisecond), ms(cpu)/float64(max(len(sent), 1)), 100*cpu.Seconds()/el.Seconds(),
		simCPU.Round(time.Millisecond), ms(simCPU)/float64(max(len(sent), 1)))
	hist, _ := json.Marshal(histogram(perSec, int(el/time.Second)+1))
	fmt.Printf("  check-ins per second: %s\n", hist)
	return nil
}

func histogram(m map[int]int, n int) []int {
	out := make([]int, n)
	for k, v := range m {
		if k < n {
			out[k] = v
		}
	}
	return out
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
