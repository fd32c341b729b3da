package states

import (
	"github.com/compose-spec/compose-go/v2/types"

	"github.com/tikali/monky-deployd/internal/bundle"
)

// checkModel is the policy's findings on the model compose will run, as words.
func checkModel(p *types.Project, rel string, allowPrivileged bool) []string {
	var words []string
	for _, f := range bundle.CheckModel(p, rel, allowPrivileged) {
		words = append(words, f.String())
	}
	return words
}
