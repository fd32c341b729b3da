package states

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/tikali/monky-deployd/internal/redact"
	"github.com/tikali/monky-deployd/machine"
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

// imported is what a takeover found on the box.
type imported struct {
	tokenSource string // "" when no token file was found
	tokenFrom   string // how the source is known, for the journal
	applied     string // the applied sha, "" when none was found
	appliedFrom string // state.json or current
	releases    []store.Applied
	problems    []string // what was found and not used, each said in the journal
	// legacy: a 0.1.x state.json is on the box (read, or found unusable)
	legacy bool
}

func (im *imported) empty() bool {
	return im.tokenSource == "" && im.applied == "" && len(im.releases) == 0 && len(im.problems) == 0
}

// fresh reports whether the state file has never recorded anything a takeover could clobber:
// no tick, no applied sha, no applied history (a new state.db, or one moved aside as corrupt).
func (tk *tick) fresh() bool {
	rec := tk.eng.Record()
	if rec.Tick != 0 || rec.AppliedSha != "" {
		return false
	}
	empty := true
	_ = tk.Store.View(func(tx store.Tx) error {
		h, err := tx.AppliedHistory()
		empty = err == nil && len(h) == 0
		return nil
	})
	return empty
}

// takeover imports, into a state file that has never ticked, what a 0.1.x agent left on the
// box: the token in bao.token (its source from state.json), the applied sha (state.json's,
// else the release `current` points at) and every release under releases/ as applied before,
// so a rollback to one is refused as it was. Nothing on disk is changed. The journal's first
// entry lists what was imported and what was found unusable; a box with nothing to import
// (a new install) gets no entry.
func (tk *tick) takeover() error {
	started := tk.Now()
	im := tk.scanLegacy()
	aside := movedAsideOf(tk.Store)
	if im.empty() && aside == nil {
		return nil
	}
	rec := tk.eng.Record()
	var words []string
	if im.tokenSource != "" {
		if rec.Token.Present {
			im.tokenSource = "" // a token this agent stored itself (`bootstrap` before the first tick)
		} else {
			words = append(words, fmt.Sprintf("token from bao.token (source %s)", im.tokenFrom))
		}
	}
	if im.applied != "" {
		words = append(words, fmt.Sprintf("applied sha %s from %s", machine.ShortSha(im.applied), im.appliedFrom))
	}
	if len(im.releases) > 0 {
		shas := make([]string, len(im.releases))
		for i, r := range im.releases {
			shas[i] = machine.ShortSha(r.Sha)
		}
		words = append(words, fmt.Sprintf("%d release(s) as applied before: %s", len(im.releases), strings.Join(shas, ", ")))
	}
	if len(words) == 0 && len(im.problems) == 0 && !im.legacy && aside == nil {
		return nil // a new install whose token `bootstrap` stored: nothing to say
	}
	// "0.1.x" only where its state.json was found; a state file started afresh says so
	head, what := "took over a 0.1.x box: imported ", "imported nothing"
	if !im.legacy {
		head, what = "a fresh state file: took what the box holds: ", "nothing on the box to take"
		if aside != nil {
			head = fmt.Sprintf("started afresh: the state file was unusable (%s) and is kept at %s; took what the box holds: ", aside.Problem, aside.Path)
		}
	}
	detail := head + strings.Join(words, "; ")
	if len(words) == 0 {
		detail = strings.TrimSuffix(head, "took what the box holds: ") + what
		if im.legacy {
			detail = "took over a 0.1.x box: imported nothing"
		}
	}
	if len(im.problems) > 0 {
		detail += "; ignored: " + strings.Join(im.problems, "; ")
	}
	if im.legacy {
		detail += "; " + LegacyStateFile + " left as it was"
	}
	return tk.eng.Note(machine.NoteTakeover, "", redact.String(detail), started, func(r *store.Record, tx store.Tx) error {
		if im.tokenSource != "" {
			r.Token = store.TokenMeta{Present: true, Source: im.tokenSource}
		}
		if im.applied != "" {
			r.AppliedSha = im.applied
		}
		for _, x := range im.releases {
			if err := tx.AddApplied(x); err != nil {
				return err
			}
		}
		return nil
	})
}

// scanLegacy reads bao.token, state.json, releases/ and `current` without changing any of them.
func (tk *tick) scanLegacy() *imported {
	im := &imported{}
	st, problem := readLegacyState(filepath.Join(tk.Cfg.StateDir, LegacyStateFile))
	if problem != "" {
		im.problems = append(im.problems, problem)
	}
	im.legacy = st != nil || problem != ""

	if tok, err := readSecretFile(tk.Cfg.TokenPath()); err != nil {
		im.problems = append(im.problems, redact.String(err.Error()))
	} else if tok != "" {
		if st != nil && st.Token != nil && st.Token.Source != nil {
			switch s := *st.Token.Source; s {
			case SourceBootstrap, SourceLease:
				im.tokenSource, im.tokenFrom = s, s+" from "+LegacyStateFile
			default:
				im.problems = append(im.problems, fmt.Sprintf("%s token.source %q (not bootstrap or lease)", LegacyStateFile, clip(s)))
			}
		}
		if im.tokenSource == "" {
			// unknown: the first check of the token (lookup-self) keeps it; a bootstrap token is
			// swapped for a lease at the next apply, which is what 0.1.x did too
			im.tokenSource, im.tokenFrom = SourceBootstrap, "unknown, taken as bootstrap"
		}
	}

	releases := filepath.Join(tk.Cfg.DeployDir, "releases")
	entries, err := os.ReadDir(releases)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		im.problems = append(im.problems, fmt.Sprintf("releases: %v", err))
	}
	for _, e := range entries {
		if !e.IsDir() || !isSha(e.Name()) {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		im.releases = append(im.releases, store.Applied{Sha: e.Name(), At: info.ModTime().UTC()})
	}

	var current string
	if target, err := os.Readlink(tk.currentDir()); err == nil {
		base := filepath.Base(target)
		if isSha(base) && filepath.Base(filepath.Dir(target)) == "releases" {
			if _, err := os.Stat(filepath.Join(releases, base)); err == nil {
				current = base
			} else {
				im.problems = append(im.problems, fmt.Sprintf("current → %s, which does not exist", clip(target)))
			}
		} else {
			im.problems = append(im.problems, fmt.Sprintf("current → %s, not a release", clip(target)))
		}
	}

	if st != nil && st.AppliedSha != nil && *st.AppliedSha != "" {
		if s := *st.AppliedSha; isSha(s) {
			im.applied, im.appliedFrom = s, LegacyStateFile
		} else {
			im.problems = append(im.problems, fmt.Sprintf("%s applied_sha %q (not a sha)", LegacyStateFile, clip(s)))
		}
	}
	if im.applied == "" && current != "" {
		im.applied, im.appliedFrom = current, "current"
	}
	if im.applied != "" && current != "" && im.applied != current {
		im.problems = append(im.problems, fmt.Sprintf("current → releases/%s disagrees with %s (kept)", machine.ShortSha(current), LegacyStateFile))
	}

	// oldest first by when each release was promoted; the applied sha last, as it is the newest
	// apply whatever its directory's time says
	sort.SliceStable(im.releases, func(i, j int) bool {
		ri, rj := im.releases[i], im.releases[j]
		if (ri.Sha == im.applied) != (rj.Sha == im.applied) {
			return rj.Sha == im.applied
		}
		return ri.At.Before(rj.At)
	})
	if n := len(im.releases); n > 0 && im.releases[n-1].Sha == im.applied {
		last := im.releases[n-1].At
		for _, r := range im.releases[:n-1] {
			if r.At.After(last) {
				last = r.At
			}
		}
		im.releases[n-1].At = last.Add(time.Second)
	} else if im.applied != "" {
		// the applied sha's directory is gone: it was still applied before
		at := time.Unix(0, 0).UTC()
		if n > 0 {
			at = im.releases[n-1].At.Add(time.Second)
		}
		im.releases = append(im.releases, store.Applied{Sha: im.applied, At: at})
	}
	return im
}

// readLegacyState reads state.json: nil and "" when absent; nil and a problem when it cannot
// be used (unreadable, too big, not a JSON object, applied_sha not a string…). Never fatal.
func readLegacyState(path string) (*legacyState, string) {
	f, err := os.Open(path)
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

// movedAsideOf is the corrupt state file st replaced, when st knows of one.
func movedAsideOf(st store.Store) *store.MovedAside {
	if m, ok := st.(interface {
		MovedAside() (*store.MovedAside, error)
	}); ok {
		if a, err := m.MovedAside(); err == nil {
			return a
		}
	}
	return nil
}
