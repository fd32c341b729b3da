package main

import (
	"slices"
	"testing"

	"github.com/tikali/monky-deployd/internal/budget"
)

// The agent's binary answers one loader op (internal/model: the check before the lease, the
// stage and the release GC each ask it for what they want): a compose model is loaded by one
// versioned child, never by a second kind of child beside it.
func TestTheAgentServesOneLoaderOp(t *testing.T) {
	if ops := budget.Ops(); !slices.Equal(ops, []string{"compose-model"}) {
		t.Errorf("the agent registers the loader ops %q, want one: compose-model", ops)
	}
}
