// Package testkit is the one kit the tests of monky-deployd share: the binaries a test runs
// (the recording docker stub, the agent, monky-sim) built once per test process, a fake
// clock, a box driven through the built binaries against a running monky-sim, the docker
// stub's call log and knobs, release trees and bundle archives, and the small file helpers
// every suite wrote for itself.
//
// It is imported only by tests (_test.go files and the suites under test/), never by the
// agent. It imports nothing of the agent either, so that every package's own tests, internal
// ones included, may use it without an import cycle; what needs a package of the agent (the
// in-process simulator, the store) stays in that package's tests.
//
// A package whose tests build binaries runs them through Main or Run, which remove what was
// built when the tests end:
//
//	func TestMain(m *testing.M) { testkit.Main(m) }
package testkit
