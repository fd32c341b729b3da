package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/tikali/monky-deployd/internal/redact"
)

func writeJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fail(1, "json: %v", err)
	}
	_, err = fmt.Fprintln(w, redact.String(string(b)))
	return err
}
