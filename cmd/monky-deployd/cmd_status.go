package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/tikali/monky-deployd/internal/explain"
)

// statusExit is status's exit code, read from the one verdict: 0 when the box is converged or
// working on it (in flight, retrying, a temporary fault younger than stuck_after_s, the lease
// budget refilling), 1 when it needs a person (explain.NeedsPerson). A missing or unreadable
// state file is 1 as well (cmdStatus returns before it gets here).
func statusExit(s explain.Status) error {
	if s.NeedsPerson() {
		return &exitError{code: 1}
	}
	return nil
}

// quiet keeps an error's exit code and drops its words (status --quiet prints nothing).
func quiet(err error) error {
	if err == nil {
		return nil
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return &exitError{code: ee.code}
	}
	return &exitError{code: 1}
}

// privateTmp is what status adds when state_dir lies under /tmp or /var/tmp: the unit runs with
// PrivateTmp=yes, so the timer's ticks write to a /tmp of their own that no shell sees.
func privateTmp(stateDir string) string {
	for _, tmp := range []string{"/tmp", "/var/tmp"} {
		if stateDir == tmp || strings.HasPrefix(stateDir, tmp+"/") {
			return fmt.Sprintf(" here — but state_dir %s is under %s, which monky-deployd.service makes private to the unit (PrivateTmp=yes): its ticks write to a %s no shell sees; set state_dir outside it (default /var/lib/monky-deployd)", stateDir, tmp, tmp)
		}
	}
	return ""
}
