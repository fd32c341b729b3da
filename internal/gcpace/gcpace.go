// Package gcpace sets the garbage collector's pace for a process that runs once and exits,
// which is what the systemd timer starts every minute (run --once) and what every command but
// run's loop is.
//
// At Go's default pace (GOGC=100) the collector's first cycle starts when the heap reaches
// 4 MB. The libraries' package inits alone allocate about 3 MB (compose's JSON schema, the image
// reference grammar, OpenBao's client), and a heartbeat brings the process to that mark: the
// tick paid for a cycle, and for the runtime's bookkeeping around it, to free memory that the
// exit frees anyway. Measured on the bench's heartbeat (docs/PERFORMANCE.md): about 1.2–2.5 ms
// of CPU and 150–250 page faults of a 14 ms tick. At Percent the first cycle starts at 8 MB:
// a heartbeat ends long before it, and a command that does more (an apply, explain on a
// year's file) is still collected, its heap held to three times its live data instead of two.
//
// The pace is set in this package's init, which runs before the heavy inits of the libraries
// (it needs nothing but os and runtime/debug): set later, in main, it saves half as much. It is
// the package's only work at start: one environment lookup, no allocation. GOGC set in the
// environment wins over it.
package gcpace

import (
	"os"
	"runtime/debug"
)

// Percent is the GOGC of a process that runs once.
const Percent = 200

// longPercent is the GOGC of a process that lives long: Go's default.
const longPercent = 100

func init() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(Percent)
	}
}

// Long gives a process that lives long (run's loop, for days) Go's default pace back, unless
// GOGC is set in the environment.
func Long() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(longPercent)
	}
}
