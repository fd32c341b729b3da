package vocab

import (
	"fmt"
	"strings"
)

// ErrorText is the one wording of a classified error (the effects' and the transport's):
// `op: CODE (HTTP status): words — hint`. The code is left out when the words already hold it,
// the status when it is 0; the words are msg, else the cause's.
func ErrorText(op string, code Code, status int, msg string, cause error, hint string) string {
	s := op
	if code != "" && !strings.Contains(msg, string(code)) {
		s += ": " + string(code)
	}
	if status != 0 {
		s += fmt.Sprintf(" (HTTP %d)", status)
	}
	if msg != "" {
		s += ": " + msg
	} else if cause != nil {
		s += ": " + cause.Error()
	}
	if hint != "" {
		s += " — " + hint
	}
	return s
}
