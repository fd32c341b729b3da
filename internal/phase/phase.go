// Package phase times the phases of one run of a command when MONKY_DEPLOYD_TRACE is set:
// each Mark ends a phase, and Print writes them to stderr as
//
//	phase <name> <end, Unix nanoseconds> <duration since the previous mark>
//
// The first phase ("start") ends when main begins, and is measured from the process's start
// as the caller gives it (the bench harness passes the time it started the process in
// MONKY_DEPLOYD_TRACE, in Unix nanoseconds; any other value, such as 1, leaves it at zero), so
// it holds the exec and the package inits. Print
// ends with the process's resident memory as /proc/self/status counts it (kB):
//
//	memory VmHWM|RssAnon|RssFile|RssShmem <kB>
//
// Unset, Mark and Print cost one branch.
package phase

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

type mark struct {
	name string
	at   time.Time
}

var (
	mu    sync.Mutex
	on    bool
	start time.Time
	marks []mark
)

// Begin is called first thing in main: it reads MONKY_DEPLOYD_TRACE and ends the "start" phase.
func Begin() {
	v := os.Getenv("MONKY_DEPLOYD_TRACE")
	if v == "" {
		return
	}
	now := time.Now()
	mu.Lock()
	defer mu.Unlock()
	on = true
	start = now
	// a start time in the last minute is the caller's; any other value (MONKY_DEPLOYD_TRACE=1)
	// leaves the "start" phase at zero
	if ns, err := strconv.ParseInt(v, 10, 64); err == nil {
		if t := time.Unix(0, ns); !t.After(now) && now.Sub(t) < time.Minute {
			start = t
		}
	}
	marks = append(marks[:0], mark{"start", now})
}

// Mark ends the phase called name now.
func Mark(name string) {
	if !on {
		return
	}
	now := time.Now()
	mu.Lock()
	marks = append(marks, mark{name, now})
	mu.Unlock()
}

// Print writes the phases to w, once, when tracing is on.
func Print(w io.Writer) {
	if !on {
		return
	}
	mu.Lock()
	defer mu.Unlock()
	prev := start
	for _, m := range marks {
		fmt.Fprintf(w, "phase %s %d %d\n", m.name, m.at.UnixNano(), m.at.Sub(prev).Nanoseconds())
		prev = m.at
	}
	marks = marks[:0]
	on = false
	// where the resident memory is: the binary's pages (file, or shmem when it lies on a tmpfs)
	// against the heap and stacks (anon)
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			k, v, ok := strings.Cut(l, ":")
			if ok && (k == "VmHWM" || k == "RssAnon" || k == "RssFile" || k == "RssShmem") {
				fmt.Fprintf(w, "memory %s %s\n", k, strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			}
		}
	}
}
