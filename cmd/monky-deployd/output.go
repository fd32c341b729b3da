package main

import (
	"encoding/json"
	"fmt"
	"io"
)

func writeJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fail(1, "json: %v", err)
	}
	_, err = fmt.Fprintln(w, string(b))
	return err
}
