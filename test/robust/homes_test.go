package robust

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
)

// secretHome reports whether the file rel (relative to a box's directory) is where a secret
// belongs: the release's rendered .env and the resolved model compose runs (both 0600, both
// holding the secrets' values by design), the agent's docker config and token, the kit's grant
// and the simulator's own log (not the agent's).
func secretHome(rel string) bool {
	base := filepath.Base(rel)
	if base == ".env" || filepath.Base(filepath.Dir(rel)) == "resolved" && strings.HasSuffix(base, ".yaml") {
		return true
	}
	switch rel {
	case "state/docker/config.json", "state/bao.token", "kit/bootstrap.jwt", "sim.log":
		return true
	}
	return false
}

// withoutModels is the docker stub's call log without the copies it keeps of each -f file
// (the resolved model: a secret's home); argv, the environment's names and the rest stay, so a
// secret on docker's command line is still found.
func withoutModels(raw []byte) []byte {
	var out bytes.Buffer
	for _, line := range bytes.Split(raw, []byte("\n")) {
		var call map[string]any
		if json.Unmarshal(line, &call) != nil {
			out.Write(line)
			out.WriteByte('\n')
			continue
		}
		delete(call, "files")
		b, _ := json.Marshal(call)
		out.Write(b)
		out.WriteByte('\n')
	}
	return out.Bytes()
}
