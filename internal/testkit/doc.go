// Package testkit is the one kit the tests of monky-deployd share, so that a harness, a fake
// or a helper is written once:
//
//   - Build, FakeDocker, Bin: the binaries a test runs (the recording docker stub, the agent,
//     monky-sim), built once per test process into BinDir; Run and Main remove them;
//   - Clock: a fake clock for the agent's and the simulator's Now;
//   - Box, StartBox: one simulated install driven through the built binaries against a
//     running monky-sim, with Exec for a run's exit code and signal;
//   - DockerCalls, SetDockerKnob: the docker stub's call log and knobs;
//   - Tar, BundleMeta, Bundle, CopyTree: bundle archives, bundle.json and release trees;
//   - WriteFile, Mode, Golden, ErrorAs, Root: the small helpers every suite wrote for itself.
//
// It is imported only by tests (_test.go files and the suites under test/), never by the
// agent. It imports nothing of the agent either, so that every package's own tests, internal
// ones included, may use it without an import cycle; what needs a package of the agent (the
// in-process simulator, the store) stays in that package's tests. Root finds the module from
// this file's path, so the tests are not built with -trimpath.
//
// A package whose tests build binaries runs them through Main or Run, which remove what was
// built when the tests end:
//
//	func TestMain(m *testing.M) { testkit.Main(m) }
package testkit
