//go:build heartbeat

package bundle

// The heartbeat build (-tags heartbeat: cmd/monky-deployd, states/handover.go) links no
// compose loader: it hands every tick that fetches a bundle to the complete agent before the
// bundle is fetched, so Check is never called in it.

type model struct{}

func loadCompose(*Bundle, *envTemplate, ComposeEnv, string) (*model, *Refusal) {
	panic("bundle: the heartbeat build has no compose loader; bundles are checked by the complete agent")
}

func (*model) findings(*Bundle) []string { return nil }
