package failpoint

import (
	"os"
	"strings"
	"sync"
	"syscall"
)

var (
	once   sync.Once
	points map[string]bool
)

// Hit kills the process with SIGKILL when MONKY_DEPLOYD_FAILPOINT (a comma list) names point.
// It never returns then: the calling thread does not come back from its kill(2) (see the
// package doc).
func Hit(point string) {
	once.Do(func() {
		points = map[string]bool{}
		for _, p := range strings.Split(os.Getenv("MONKY_DEPLOYD_FAILPOINT"), ",") {
			if p = strings.TrimSpace(p); p != "" {
				points[p] = true
			}
		}
	})
	if points[point] {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // not reached: the kill ends this thread on its way back from the kernel
	}
}
