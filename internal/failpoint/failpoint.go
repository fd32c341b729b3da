// Package failpoint names the points where a crash test kills the agent. Hit(name) sends
// SIGKILL to the process itself when MONKY_DEPLOYD_FAILPOINT names that point — so a test can
// prove that a kill -9 at any step resumes at the last committed state. The points are in the
// one agent binary the package ships, so the crash suites test what runs on a box; unset (as on
// every box), the variable is read once and Hit is a map lookup.
//
// Where a kill lands is exact: the goroutine that reached the point sends SIGKILL to the
// whole process; its thread never returns from that kill(2) to run Go code again, and the
// kernel stops every other thread at once (a system call already inside the kernel completes).
// So every effect the code finished before Hit (a write, rename or fsync that returned, a
// commit made) is there as the code left it, and no effect after Hit has begun. A tick runs
// its steps on one goroutine; no other goroutine has a file, state or network operation in
// flight at a failpoint, so nothing races the kill. Where a point sits is documented with the point
// (docs/RELIABILITY.md's table): each names the last effect done before it.
package failpoint
