// Package robust holds the robustness proofs of monky-deployd as tests: the crash matrix
// (SIGKILL at every named failpoint, single and double faults), the network fault table
// (a fault-injecting TCP proxy between the agent and the simulator), disk and state-file
// faults, and the secret canary scan. The tests drive the built binaries (the agent as the
// package ships it, `make agent`; monky-sim; the recording docker stub) exactly as an
// operator's box would run them. The package has no non-test code and may not be imported.
package robust
