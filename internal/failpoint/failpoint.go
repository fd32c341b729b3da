// Package failpoint names the points where a crash test kills the agent. In a release build
// Hit compiles to nothing; built with `-tags failpoints`, Hit(name) sends SIGKILL to the
// process itself when MONKY_DEPLOYD_FAILPOINT names that point — so a test can prove that a
// kill -9 at any step resumes at the last committed state.
package failpoint
