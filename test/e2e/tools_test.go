package e2e

import (
	"os"

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
