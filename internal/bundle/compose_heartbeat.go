//go:build heartbeat

package bundle

// The heartbeat build (-tags heartbeat) carries no compose loader: it hands every tick that
// needs a bundle checked to the complete agent before any bundle is fetched (docs/PERFORMANCE.md).

// ComposeEnv is what the compose file is interpolated with before the lease.
type ComposeEnv struct {
	Project    string
	AgentEnv   []string
	ScratchDir string
}

type model struct{}

func loadCompose(*Bundle, *envTemplate, ComposeEnv, string) (*model, *Refusal) {
	panic("bundle: the heartbeat build cannot load a compose file; the complete agent checks bundles")
}

func (*model) findings(*Bundle) []string { return nil }

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	return keys
}
