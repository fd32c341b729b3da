package e2e

import (
	"os"
	"strings"

	"github.com/tikali/monky-deployd/test/e2e/tools"
)

// Compose versions: the newest that works against this engine, and one older than 2.21
// (whose `compose ps --format json` prints one JSON array).
var (
	composeNew = envOr("MONKY_E2E_COMPOSE", "v2.40.3")
	composeOld = envOr("MONKY_E2E_COMPOSE_OLD", "v2.20.3")
)

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// runCmd runs name args in dir with extra environment and returns stdout; the error carries
// stderr.
var runCmd = tools.Run

// withoutVeths drops the lines of `ip route show` that name a container's veth end: their
// link-local routes and addresses come and go with the containers, never with a project's choice.
func withoutVeths(routes string) string {
	var b strings.Builder
	for _, line := range strings.SplitAfter(routes, "\n") {
		if strings.Contains(line, " dev veth") {
			continue
		}
		b.WriteString(line)
	}
	return b.String()
}
