// Package variants holds the ways a cause can be decided from words, each of which
// TestNoCauseFromWords must find (TestNoCauseFromWordsFindsEveryVariant), and the ways words
// may be used without deciding anything, which it must not.
package variants

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

type Entry struct {
	Code     string
	Detail   string
	Evidence string
}

var pattern = regexp.MustCompile(`denied`)

// Each function named decides* (and has) decides from words; callsHelper and fromCode do not.

func decidesContains(e Entry) bool { return strings.Contains(e.Detail, "denied") }

func decidesLocal(e Entry) bool {
	d := e.Detail
	return strings.Contains(d, "denied")
}

func decidesVar(e Entry) bool {
	var d = strings.ToLower(e.Evidence)
	return strings.HasPrefix(d, "denied")
}

func decidesIndex(e Entry) bool { return strings.Index(e.Detail, "denied") >= 0 }

func decidesSwitch(e Entry) string {
	switch {
	case strings.HasPrefix(e.Detail, "pull"):
		return "pull"
	}
	return ""
}

func decidesSwitchTag(e Entry) string {
	switch e.Detail[:4] {
	case "pull":
		return "pull"
	}
	return ""
}

func decidesRegexp(e Entry) bool { return pattern.MatchString(e.Detail) }

func decidesBytes(e Entry) bool { return bytes.Contains([]byte(e.Detail), []byte("denied")) }

func has(s, sub string) bool { return strings.Contains(s, sub) } // decides: its caller passes words

func callsHelper(e Entry) bool { return has(e.Detail, "denied") }

func decidesMethodValue(e Entry) bool {
	match := strings.Contains
	return match(e.Detail, "denied")
}

func decidesErrorText(err error) bool { return strings.Contains(err.Error(), "connection refused") }

func decidesErrorCompare(err error) bool {
	msg := fmt.Sprint(err)
	return msg == "EOF"
}

func decidesMapLookup(e Entry) string {
	return map[string]string{"denied": "REGISTRY_DENIED"}[e.Detail]
}

func decidesClosure(e Entry) bool {
	denied := func(s string) bool { return strings.HasSuffix(s, "denied") }
	return denied(e.Detail)
}

// The words may be written, joined, trimmed and checked for being there at all.

var errTyped = errors.New("typed")

func writes(e Entry, err error) string {
	s := strings.TrimPrefix(e.Detail, e.Code+": ")
	if e.Detail == "" || len(e.Evidence) > 80 {
		return s
	}
	if errors.Is(err, errTyped) {
		return s + "; " + err.Error()
	}
	return fmt.Sprintf("%s (%s)", s, strings.ToUpper(e.Evidence))
}

func fromCode(e Entry) bool { return strings.HasPrefix(e.Code, "BAO_") }
