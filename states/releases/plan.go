// Package releases is the garbage collection that follows every successful apply: the release
// directories beyond keep_releases, the resolved models whose release is gone and, with
// `run --prune`, the images of the env's repositories that no kept release names. What goes is
// decided by pure plans (Plan, Images) over what was read; Prune reads, plans and removes.
package releases

import (
	"sort"
	"time"

	"github.com/distribution/reference"
)

// Dir is a release directory under releases/ as a prune sees it.
type Dir struct {
	Name    string
	Applied time.Time // when it was last applied (the applied history); zero when never
	Mod     time.Time // the directory's time
}

// Plan decides which release directories a prune keeps: every protected one, then the newest
// of the others (by applied time, then by the directory's time, then by name) while fewer
// than keep are kept. The others go, newest first.
func Plan(dirs []Dir, protected map[string]bool, keep int) (kept, gone []string) {
	var others []Dir
	for _, d := range dirs {
		if protected[d.Name] {
			kept = append(kept, d.Name)
			continue
		}
		others = append(others, d)
	}
	sort.Slice(others, func(i, j int) bool {
		if !others[i].Applied.Equal(others[j].Applied) {
			return others[i].Applied.After(others[j].Applied)
		}
		if !others[i].Mod.Equal(others[j].Mod) {
			return others[i].Mod.After(others[j].Mod)
		}
		return others[i].Name > others[j].Name
	})
	slots := max(keep-len(kept), 0)
	for i, d := range others {
		if i < slots {
			kept = append(kept, d.Name)
			continue
		}
		gone = append(gone, d.Name)
	}
	return kept, gone
}

// OnlyGone is what removing the releases that named gone frees: the images of have that a removed
// release named and no kept release (used) names, in have's order.
func OnlyGone(gone, used []reference.Named, have []string) []string {
	keep, named := map[string]bool{}, map[string]bool{}
	for _, r := range used {
		keep[reference.TagNameOnly(r).String()] = true
	}
	for _, r := range gone {
		named[reference.TagNameOnly(r).String()] = true
	}
	var out []string
	for _, ref := range have {
		n, err := reference.ParseNormalizedNamed(ref)
		if err != nil {
			continue
		}
		if k := reference.TagNameOnly(n).String(); named[k] && !keep[k] {
			out = append(out, ref)
		}
	}
	return out
}

// Images decides which local images (have, as docker lists them) a prune removes: those of a
// repository some kept release names (used) that no kept release names, tag or digest alike.
// Names compare as docker resolves them (nginx is docker.io/library/nginx:latest). An image of
// another repository, or one whose name does not parse, is never removed.
func Images(used []reference.Named, have []string) []string {
	keep := map[string]bool{}
	repos := map[string]bool{}
	for _, r := range used {
		keep[reference.TagNameOnly(r).String()] = true
		repos[r.Name()] = true
	}
	var remove []string
	for _, ref := range have {
		n, err := reference.ParseNormalizedNamed(ref)
		if err != nil || !repos[n.Name()] || keep[reference.TagNameOnly(n).String()] {
			continue
		}
		remove = append(remove, ref)
	}
	return remove
}
