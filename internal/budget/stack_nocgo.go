//go:build !cgo

package budget

// smallStacks does nothing in a build without cgo, the agent's own: the Go runtime gives each
// thread a small stack of its own, whatever RLIMIT_STACK says (stack_cgo.go).
func smallStacks() error { return nil }
