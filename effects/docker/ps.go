package docker

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/tikali/monky-deployd/effects"
)

// psRow is the part of a `compose ps --format json` row the agent uses.
type psRow struct {
	Name    string `json:"Name"`
	Service string `json:"Service"`
	State   string `json:"State"`
	Health  string `json:"Health"`
	// ExitCode and Status: how an exited container ended, and how long a running one has run.
	ExitCode int    `json:"ExitCode"`
	Status   string `json:"Status"`
	ID       string `json:"ID"`
}

// ParsePS parses `compose ps --all --format json`: one JSON array (compose < 2.21), one object per
// line (≥ 2.21), or nothing at all (no container).
func ParsePS(out []byte) ([]effects.Container, error) {
	trimmed := bytes.TrimSpace(out)
	if len(trimmed) == 0 {
		return []effects.Container{}, nil
	}
	var rows []psRow
	if trimmed[0] == '[' {
		if err := json.Unmarshal(trimmed, &rows); err != nil {
			return nil, fmt.Errorf("compose ps output: not a JSON array of containers: %w", err)
		}
	} else {
		dec := json.NewDecoder(bytes.NewReader(trimmed))
		for {
			var r *psRow
			err := dec.Decode(&r)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("compose ps output: not JSON objects, one per line: %w", err)
			}
			if r != nil {
				rows = append(rows, *r)
			}
		}
	}
	cs := make([]effects.Container, 0, len(rows))
	for _, r := range rows {
		cs = append(cs, effects.Container{Name: r.Name, Service: r.Service, State: r.State, Health: r.Health, ExitCode: r.ExitCode, Status: r.Status, ID: r.ID})
	}
	return cs, nil
}
