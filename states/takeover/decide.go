package takeover

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/tikali/monky-deployd/machine"
	"github.com/tikali/monky-deployd/store"
)

// Plan is what a takeover imports into a state file that has never ticked, and what its
// journal entry says.
type Plan struct {
	// Say: the takeover is journaled (Detail) and Update committed with it; a box with nothing
	// to import (a new install) gets no entry.
	Say    bool
	Detail string

	tokenSource string // "" when no token is imported
	applied     string // the applied sha, "" when none was found
	releases    []store.Applied
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

// Decide is the takeover of the box b: the token in bao.token (its source from state.json),
// the applied sha (state.json's, else the release `current` points at) and every release under
// releases/ as applied before, so a rollback to one is refused as it was. tokenStored: the
// state file already holds a token this agent stored itself (`bootstrap` before the first
// tick), which is kept. aside is the corrupt state file this one replaced, nil when none.
func Decide(b Box, tokenStored bool, aside *store.MovedAside) Plan {
	im := scan(b)
	if im.empty() && aside == nil {
		return Plan{}
	}
	var words []string
	if im.tokenSource != "" {
		if tokenStored {
			im.tokenSource = ""
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
		return Plan{} // a new install whose token `bootstrap` stored: nothing to say
	}
	return Plan{Say: true, Detail: im.detail(words, aside), tokenSource: im.tokenSource, applied: im.applied, releases: im.releases}
}

// detail is the journal's words for a takeover that imported words.
func (im *imported) detail(words []string, aside *store.MovedAside) string {
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
	return detail
}

// Update writes the plan into the state file, in the transaction of its journal entry.
func (p Plan) Update(r *store.Record, tx store.Tx) error {
	if p.tokenSource != "" {
		r.Token = store.TokenMeta{Present: true, Source: p.tokenSource}
	}
	if p.applied != "" {
		r.AppliedSha = p.applied
	}
	for _, x := range p.releases {
		if err := tx.AddApplied(x); err != nil {
			return err
		}
	}
	return nil
}

// scan decides, from what Read found, what can be imported and what cannot.
func scan(b Box) *imported {
	im := &imported{releases: b.releases}
	if b.legacyProblem != "" {
		im.problems = append(im.problems, b.legacyProblem)
	}
	im.legacy = b.legacy != nil || b.legacyProblem != ""
	im.token(b)
	if b.releasesErr != nil {
		im.problems = append(im.problems, fmt.Sprintf("releases: %v", b.releasesErr))
	}
	current := im.current(b)
	if st := b.legacy; st != nil && st.AppliedSha != nil && *st.AppliedSha != "" {
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
	im.order()
	return im
}

// token decides bao.token's source: state.json's token.source, else unknown, taken as
// bootstrap (the first check of the token, lookup-self, keeps it; a bootstrap token is
// swapped for a lease at the next apply, which is what 0.1.x did too).
func (im *imported) token(b Box) {
	if b.tokenErr != nil {
		im.problems = append(im.problems, b.tokenErr.Error())
		return
	}
	if b.token == "" {
		return
	}
	if st := b.legacy; st != nil && st.Token != nil && st.Token.Source != nil {
		switch s := *st.Token.Source; s {
		case store.SourceBootstrap, store.SourceLease:
			im.tokenSource, im.tokenFrom = s, s+" from "+LegacyStateFile
		default:
			im.problems = append(im.problems, fmt.Sprintf("%s token.source %q (not bootstrap or lease)", LegacyStateFile, clip(s)))
		}
	}
	if im.tokenSource == "" {
		im.tokenSource, im.tokenFrom = store.SourceBootstrap, "unknown, taken as bootstrap"
	}
}

// current is the release `current` points at, "" when it points at none (said as a problem).
func (im *imported) current(b Box) string {
	if b.current == "" {
		return ""
	}
	base := filepath.Base(b.current)
	if !isSha(base) || filepath.Base(filepath.Dir(b.current)) != "releases" {
		im.problems = append(im.problems, fmt.Sprintf("current → %s, not a release", clip(b.current)))
		return ""
	}
	if !b.currentExists {
		im.problems = append(im.problems, fmt.Sprintf("current → %s, which does not exist", clip(b.current)))
		return ""
	}
	return base
}

// order sorts the releases oldest first by when each was promoted, the applied sha last, as
// it is the newest apply whatever its directory's time says (and added when its directory is
// gone: it was still applied before).
func (im *imported) order() {
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
		at := time.Unix(0, 0).UTC()
		if n > 0 {
			at = im.releases[n-1].At.Add(time.Second)
		}
		im.releases = append(im.releases, store.Applied{Sha: im.applied, At: at})
	}
}
