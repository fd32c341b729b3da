package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/tikali/monky-deployd/internal/sanitize"
)

func writeJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fail(1, "json: %v", err)
	}
	_, err = fmt.Fprintln(w, string(b))
	return err
}

// printText writes text a person reads on a terminal — explain's, status' and the triage's words,
// filled from a record or a file name that may come from a box nobody trusts — through the one
// escaper: every control character but a line break or a tab is written as an escape, never raw
// (a copy's ESC and BEL bytes used to reach the terminal). The --json forms are escaped by JSON.
func printText(w io.Writer, text string) {
	fmt.Fprint(w, sanitize.Text(text))
}
