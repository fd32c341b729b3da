//go:build heartbeat

package states

import "github.com/compose-spec/compose-go/v2/types"

// checkModel: the heartbeat build stages nothing (it hands every apply to the complete agent).
func checkModel(*types.Project, string, bool) []string {
	panic("states: the heartbeat build has no policy; releases are staged by the complete agent")
}
