// Package budget runs work on outside input in a child process the operating system bounds: the
// agent's own binary re-executed with MONKY_DEPLOYD_LOADER=<op> in its environment, which a
// package that registered op with Serve recognises in its init, before main runs. The child sets
// its own limits first (RLIMIT_DATA, RLIMIT_CPU, RLIMIT_NOFILE, RLIMIT_CORE), then reads its one
// request from stdin, writes its one answer to stdout and exits; the parent (Run) hands it the
// request, reads at most MaxAnswer bytes back and kills it at the caller's deadline or WallTime.
//
// A child stopped by a limit is an *Exceeded naming the bound. The child holds no state and
// writes nothing but what its op writes; the package reads no file but the child's own
// /proc/self/status and starts nothing else.
package budget

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// The budget of one child (docs/SECURITY.md, "A budget by construction").
const (
	// MemoryBytes bounds the child's anonymous memory (its heap and stacks), enforced as
	// RLIMIT_DATA: what a load may use above the agent's own memory.
	MemoryBytes = 64 << 20
	// CPUSeconds bounds the child's CPU time, every thread counted (RLIMIT_CPU: the kernel kills
	// it at the hard limit).
	CPUSeconds = 10
	// WallTime bounds the child's life when the caller's deadline is later or absent.
	WallTime = 60 * time.Second
	// MaxRequest bounds what a child reads from stdin; MaxAnswer what the parent reads back.
	MaxRequest = 64 << 20
	MaxAnswer  = 8 << 20
	// maxStderr is what the parent keeps of the child's stderr, for the words of a failure.
	maxStderr = 16 << 10
)

// The limits a parent hands its children: the constants above, lowered by this package's
// tests only. The child reads them from limitsVar.
var (
	memoryBytes uint64 = MemoryBytes
	cpuSeconds  uint64 = CPUSeconds
	wallTime           = WallTime
)

// limitsVar carries the limits to the child: "<memory bytes> <CPU seconds>".
const limitsVar = "MONKY_DEPLOYD_LOADER_LIMITS"

// EnvVar names the child's op in its environment. Of the parent's environment only HOME (a
// compose path's `~` is the home directory) and TMPDIR (where scratch copies go) reach it.
const EnvVar = "MONKY_DEPLOYD_LOADER"

// passed is what the child inherits of the parent's environment.
var passed = []string{"HOME", "TMPDIR"}

// Exceeded is a child stopped by its budget: Bound is "memory", "CPU" or "time".
type Exceeded struct {
	Bound string
	Words string
}

func (e *Exceeded) Error() string { return e.Words }

// ErrCancelled is a child killed because the caller's context was cancelled (not past its
// deadline): nothing is known about the input. A child killed at the context's deadline is an
// *Exceeded of the time bound.
var ErrCancelled = errors.New("the load was cancelled")

// ErrUnavailable is a loader that could not start or answer — the binary replaced or removed
// under a running agent (what a package upgrade does: "request version 2, this loader speaks
// 3", "fork/exec …: no such file"), a child that failed in words or died of a signal no bound
// explains. It says nothing of the release: the next tick loads it again; only a bound the child
// reached (*Exceeded) or its answer decides.
var ErrUnavailable = errors.New("the loader could not start or answer")

// A Handler answers one request in the child.
type Handler func(req []byte) ([]byte, error)

var (
	mu       sync.Mutex
	handlers = map[string]Handler{}
	started  atomic.Int64
)

// Started is how many children this process has started: tests tell a load from none by it.
func Started() int64 { return started.Load() }

// Ops are the ops registered in this process, sorted.
func Ops() []string {
	mu.Lock()
	defer mu.Unlock()
	return slices.Sorted(maps.Keys(handlers))
}

// Serve registers h for op and, in a child started for op, runs it and exits: call it from an
// init of the package that holds h, so that the child never reaches main. In any other process
// it only registers h.
func Serve(op string, h Handler) {
	mu.Lock()
	handlers[op] = h
	mu.Unlock()
	if os.Getenv(EnvVar) != op {
		return
	}
	os.Exit(child(h))
}

// child is the whole life of a child: limits, one request, one answer.
func child(h Handler) int {
	if err := smallStacks(); err != nil {
		fmt.Fprintf(os.Stderr, "budget: cannot lower the stack limit: %v\n", err)
		return 3
	}
	if err := limit(); err != nil {
		fmt.Fprintf(os.Stderr, "budget: cannot set the limits: %v\n", err)
		return 3
	}
	req, err := io.ReadAll(io.LimitReader(os.Stdin, MaxRequest+1))
	if err != nil || len(req) > MaxRequest {
		fmt.Fprintf(os.Stderr, "budget: the request is unreadable or over %d bytes\n", MaxRequest)
		return 3
	}
	ans, err := h(req)
	if err != nil {
		fmt.Fprintf(os.Stderr, "budget: %v\n", err)
		return 1
	}
	if _, err := os.Stdout.Write(ans); err != nil {
		return 1
	}
	if hwm, err := statusKB("VmHWM"); err == nil {
		fmt.Fprintf(os.Stderr, "%s%d\n", peakLine, hwm) // the child's own peak: the exec began its count afresh
	}
	return 0
}

// peakLine begins the one line an answering child writes to stderr: its own peak resident
// memory in kB (VmHWM). The rusage of a child counts the parent's peak too (Linux keeps the
// larger of the child's and the memory it was forked from), so only the child can say its own.
const peakLine = "budget: peak_kb "

// statusKB is one "<key>: <n> kB" line of /proc/self/status, in kB.
func statusKB(key string) (uint64, error) {
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(raw), "\n") {
		k, v, _ := strings.Cut(line, ":")
		var kb uint64
		if k == key {
			if _, err := fmt.Sscanf(strings.TrimSpace(v), "%d kB", &kb); err != nil {
				return 0, err
			}
			return kb, nil
		}
	}
	return 0, fmt.Errorf("no %s in /proc/self/status", key)
}

// limit sets the child's limits, before it reads anything. RLIMIT_DATA counts what the Go
// runtime has mapped writable, touched or not, from its start; the child may map MemoryBytes
// more than its anonymous memory at the limit's setting, so that its anonymous memory (heap and
// stacks, what it adds to the box's) stays within MemoryBytes.
func limit() error {
	mem, cpu := uint64(MemoryBytes), uint64(CPUSeconds)
	if _, err := fmt.Sscanf(os.Getenv(limitsVar), "%d %d", &mem, &cpu); err != nil {
		return fmt.Errorf("%s: %w", limitsVar, err)
	}
	debug.SetMemoryLimit(int64(mem) * 5 / 8) // the collector works hard before the hard limit
	data, anon, err := dataNow()
	if err != nil {
		return err
	}
	for _, l := range []struct {
		res int
		max uint64
	}{
		{syscall.RLIMIT_DATA, data - min(anon, data) + mem},
		{syscall.RLIMIT_CPU, cpu},
		{syscall.RLIMIT_CORE, 0},
		{syscall.RLIMIT_NOFILE, 64},
	} {
		if err := syscall.Setrlimit(l.res, &syscall.Rlimit{Cur: l.max, Max: l.max}); err != nil {
			return err
		}
	}
	return nil
}

// dataNow is the process's VmData and RssAnon, in bytes.
func dataNow() (data, anon uint64, err error) {
	if data, err = statusKB("VmData"); err != nil {
		return 0, 0, err
	}
	anon, _ = statusKB("RssAnon")
	return data << 10, anon << 10, nil
}

// Decode reads a child's request into req: JSON whose "v" must be version (the child is the
// parent's own binary, so another version cannot be; it is refused all the same).
func Decode(raw []byte, req any, version int) error {
	var v struct {
		V int `json:"v"`
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return fmt.Errorf("request: %w", err)
	}
	if v.V != version {
		return fmt.Errorf("request version %d, this loader speaks %d", v.V, version)
	}
	if err := json.Unmarshal(raw, req); err != nil {
		return fmt.Errorf("request: %w", err)
	}
	return nil
}

// Run starts the agent's own binary as a child for op, hands it req and returns its answer. A
// child the budget stopped is an *Exceeded; one the context ended early is ErrCancelled
// (wrapped with the context's error); any other failure is an error in words.
func Run(ctx context.Context, op string, req []byte) ([]byte, error) {
	mu.Lock()
	_, ok := handlers[op]
	mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("budget: no handler for %q in this binary", op)
	}
	mu.Lock()
	exe := executable
	mu.Unlock()
	self, err := exe()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	wall, cancel := context.WithTimeout(ctx, wallTime)
	defer cancel()
	cmd := exec.CommandContext(wall, self)
	// a load is one goroutine's work: two Ps keep the runtime's threads (and their stacks) few
	// however many processors the box has
	cmd.Env = []string{EnvVar + "=" + op, fmt.Sprintf("%s=%d %d", limitsVar, memoryBytes, cpuSeconds), "GOMAXPROCS=2"}
	for _, k := range passed {
		if v, ok := os.LookupEnv(k); ok {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
	}
	cmd.Dir = "/"
	cmd.Stdin = bytes.NewReader(req)
	out := &capped{max: MaxAnswer}
	errOut := &capped{max: maxStderr}
	cmd.Stdout, cmd.Stderr = out, errOut
	cmd.WaitDelay = time.Second
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	started.Add(1)
	t0 := time.Now()
	err = cmd.Run()
	// the agent's own peak once the child ended bounds what of it the child's rusage may hold;
	// the kernel syncs each thread's count of resident pages lazily, hence the slack
	floor := selfPeak() + peakSlack
	own := childPeak(cmd.ProcessState, errOut.buf.String(), floor)
	trace(op, time.Since(t0), cmd.ProcessState, own)
	switch {
	case err == nil && out.over:
		return nil, fmt.Errorf("budget: the answer is over %d bytes", MaxAnswer)
	case err == nil:
		return out.buf.Bytes(), nil
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return nil, &Exceeded{Bound: "time", Words: "the load ran past the tick's deadline"}
	case ctx.Err() != nil:
		return nil, fmt.Errorf("%w: %w", ErrCancelled, ctx.Err())
	case wall.Err() != nil:
		return nil, &Exceeded{Bound: "time", Words: fmt.Sprintf("the load ran past its time bound (%s of wall time)", wallTime)}
	}
	err = stopped(cmd.ProcessState, errOut.buf.String(), err, own, memoryBytes, cpuSeconds)
	var over *Exceeded
	if errors.As(err, &over) {
		return nil, err
	}
	return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
}

// executable is the binary a child runs: the agent's own (a test may point it elsewhere).
var executable = os.Executable

// trace writes one line about the child to stderr when MONKY_DEPLOYD_TRACE is set (as
// internal/phase does for the agent's own run): its wall time, CPU time and peak resident
// memory (its own, childPeak: 0 when it died below the agent's own peak, which cannot be told
// apart), for `make bench`'s hostile-verify table.
//
//	loader <op> wall_ms <n> cpu_ms <n> maxrss_kb <n> exit <status>
func trace(op string, wall time.Duration, ps *os.ProcessState, own uint64) {
	if os.Getenv("MONKY_DEPLOYD_TRACE") == "" || ps == nil {
		return
	}
	fmt.Fprintf(os.Stderr, "loader %s wall_ms %d cpu_ms %d maxrss_kb %d exit %q\n", op, wall.Milliseconds(),
		(ps.UserTime() + ps.SystemTime()).Milliseconds(), own>>10, ps.String())
}

// peakSlack is how far a process's resident count may lag behind its pages (Linux batches each
// thread's updates): a child's rusage within it of the agent's own peak says nothing of the child.
const peakSlack = 8 << 20

// selfPeak is this process's own peak resident memory in bytes (its rusage).
func selfPeak() uint64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil || ru.Maxrss < 0 {
		return 0
	}
	return uint64(ru.Maxrss) << 10
}

// childPeak is the child's own peak resident memory in bytes: what an answering child said
// (peakLine), else its rusage when that is above floor, the parent's own peak when it started
// the child — the rusage of a child is the larger of its own peak and the memory it was forked
// from, so a figure at or below floor may be the parent's and says nothing of the child (0).
func childPeak(ps *os.ProcessState, stderr string, floor uint64) uint64 {
	if i := strings.LastIndex(stderr, peakLine); i >= 0 {
		var kb uint64
		if _, err := fmt.Sscanf(stderr[i+len(peakLine):], "%d", &kb); err == nil {
			return kb << 10
		}
	}
	if p := peak(ps); p > floor {
		return p
	}
	return 0
}

// stopped says why a child that ran to its end did not answer; own is its own peak memory
// (childPeak), never the parent's.
func stopped(ps *os.ProcessState, stderr string, err error, own, mem, cpu uint64) error {
	if ps != nil {
		used := ps.UserTime() + ps.SystemTime()
		if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() &&
			(ws.Signal() == syscall.SIGKILL || ws.Signal() == syscall.SIGXCPU) && used >= time.Duration(cpu)*time.Second/2 {
			return &Exceeded{Bound: "CPU", Words: fmt.Sprintf("the load used up its CPU bound (%d s)", cpu)}
		}
	}
	if outOfMemory(stderr) || died(ps) && own >= mem/2 {
		// a runtime whose allocation the limit refused says so, or dies of what followed (a
		// fault in a path that cannot report it): a crash near the limit is the limit's
		return &Exceeded{Bound: "memory", Words: fmt.Sprintf("the load used up its memory bound (%d MiB)", mem>>20)}
	}
	line, _, _ := strings.Cut(strings.TrimSpace(strings.TrimPrefix(stderr, "budget: ")), "\n")
	if line == "" {
		line = err.Error()
	}
	return errors.New(line)
}

// died says whether the child ended by a signal or as the Go runtime ends on a fatal error or
// an unrecovered panic (exit status 2), not by answering or failing in words.
func died(ps *os.ProcessState) bool {
	if ps == nil {
		return false
	}
	ws, ok := ps.Sys().(syscall.WaitStatus)
	return ok && (ws.Signaled() || ws.ExitStatus() == 2)
}

// peak is the child's peak resident memory in bytes as its rusage says: the larger of its own
// and the parent's it was forked from (childPeak tells them apart).
func peak(ps *os.ProcessState) uint64 {
	if ps == nil {
		return 0
	}
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok && ru.Maxrss > 0 {
		return uint64(ru.Maxrss) << 10
	}
	return 0
}

// outOfMemory says whether a child's stderr is the Go runtime's (or a library's) words for an
// allocation the memory limit refused.
func outOfMemory(stderr string) bool {
	for _, w := range []string{"out of memory", "cannot allocate memory", "failed to reserve page summary memory"} {
		if strings.Contains(stderr, w) {
			return true
		}
	}
	return false
}

// capped keeps the first max bytes written to it and drops the rest.
type capped struct {
	buf  bytes.Buffer
	max  int
	over bool
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - c.buf.Len(); room < len(p) {
		c.over = true
		if room > 0 {
			c.buf.Write(p[:room])
		}
		return len(p), nil
	}
	return c.buf.Write(p)
}

// SetExecutable points every loader child at path — a test's stand-in for the agent's binary
// replaced or removed under a running agent — and returns what restores the agent's own.
func SetExecutable(path string) (restore func()) {
	mu.Lock()
	defer mu.Unlock()
	was := executable
	executable = func() (string, error) { return path, nil }
	return func() {
		mu.Lock()
		defer mu.Unlock()
		executable = was
	}
}
