// Package takeover is the first tick's import of what an earlier agent left on the box (the
// 0.1.x Python agent, or this one before its state file was moved aside): the token, the
// applied sha and the releases. Read reads the box without changing it; Decide, pure, says
// what is imported and what the journal says of it.
package takeover

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/tikali/monky-deployd/effects/files"
	"github.com/tikali/monky-deployd/store"
)

// LegacyStateFile is the 0.1.x (Python) agent's state file under state_dir. The agent reads it
// once, on the first tick of a state file that has never ticked, and never writes it: it stays
// byte for byte as it was, for a downgrade.
const LegacyStateFile = "state.json"

// maxLegacyState bounds what is read of state.json (the 0.1.x file is a few hundred bytes).
const maxLegacyState = 1 << 20

// legacyState is the part of 0.1.x's state.json the agent imports; every other key is ignored.
type legacyState struct {
	AppliedSha *string `json:"applied_sha"`
	Token      *struct {
		Source *string `json:"source"`
	} `json:"token"`
}

// Box is what an earlier agent left on the box, as Read found it.
type Box struct {
	legacy        *legacyState // state.json; nil when absent or unusable
	legacyProblem string       // why state.json cannot be used, "" when it can or is absent
	token         string       // bao.token, "" when absent or empty
	tokenErr      error        // bao.token could not be read
	releases      []store.Applied
	releasesErr   error  // releases/ could not be listed
	current       string // where `current` points, "" when it is not a link
	currentExists bool   // the release current points at exists
}

// Read reads state.json under stateDir, the token (with readToken), releases/ under deployDir
// and the link current, without changing any of them.
func Read(stateDir, deployDir, current string, readToken func() (string, error)) Box {
	var b Box
	b.legacy, b.legacyProblem = readLegacyState(filepath.Join(stateDir, LegacyStateFile))
	b.token, b.tokenErr = readToken()
	releases := filepath.Join(deployDir, "releases")
	entries, err := os.ReadDir(releases)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		b.releasesErr = err
	}
	for _, e := range entries {
		if !e.IsDir() || !isSha(e.Name()) {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		b.releases = append(b.releases, store.Applied{Sha: e.Name(), At: info.ModTime().UTC()})
	}
	if target, err := os.Readlink(current); err == nil {
		b.current = target
		_, err := os.Stat(filepath.Join(releases, filepath.Base(target)))
		b.currentExists = err == nil
	}
	return b
}

// readLegacyState reads state.json: nil and "" when absent; nil and a problem when it cannot
// be used (unreadable, too big, not a JSON object, applied_sha not a string…). Never fatal.
func readLegacyState(path string) (*legacyState, string) {
	f, err := files.OpenRegular(path) // a FIFO planted there is unreadable, not waited on
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, ""
		}
		return nil, fmt.Sprintf("%s unreadable: %v", LegacyStateFile, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxLegacyState+1))
	if err != nil {
		return nil, fmt.Sprintf("%s unreadable: %v", LegacyStateFile, err)
	}
	if len(b) > maxLegacyState {
		return nil, fmt.Sprintf("%s is larger than %d bytes", LegacyStateFile, maxLegacyState)
	}
	var st legacyState
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Sprintf("%s malformed (%s)", LegacyStateFile, clip(err.Error()))
	}
	return &st, ""
}

// MovedAside is the corrupt state file st replaced, when st knows of one.
func MovedAside(st store.Store) *store.MovedAside {
	if m, ok := st.(interface {
		MovedAside() (*store.MovedAside, error)
	}); ok {
		if a, err := m.MovedAside(); err == nil {
			return a
		}
	}
	return nil
}

// isSha reports whether s is a bundle sha: 64 lowercase hex characters.
func isSha(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// clip keeps a value from the outside world short and printable in the journal.
func clip(s string) string {
	s = strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return '?'
		}
		return r
	}, s)
	if len(s) > 80 {
		s = s[:80] + "…"
	}
	return s
}
