package takeover

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tikali/monky-deployd/store"
)

func TestDecide(t *testing.T) {
	sha := func(c string) string { return strings.Repeat(c, 64) }
	str := func(s string) *string { return &s }
	legacy := func(applied, source string) *legacyState {
		st := &legacyState{AppliedSha: str(applied)}
		if source != "" {
			st.Token = &struct {
				Source *string `json:"source"`
			}{Source: str(source)}
		}
		return st
	}
	t0 := time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)
	rels := func(shas ...string) []store.Applied {
		var out []store.Applied
		for i, s := range shas {
			out = append(out, store.Applied{Sha: s, At: t0.Add(time.Duration(i) * time.Hour)})
		}
		return out
	}
	for _, c := range []struct {
		name        string
		box         Box
		tokenStored bool
		aside       *store.MovedAside
		say         bool
		detail      string
		source      string
		applied     string
		order       []string
	}{
		{name: "a new install: nothing to say", box: Box{}},
		{name: "a new install whose token bootstrap stored", box: Box{token: "t"}, tokenStored: true},
		{name: "a 0.1.x box", say: true,
			box:    Box{legacy: legacy(sha("b"), "lease"), token: "t", releases: rels(sha("b"), sha("a"))},
			detail: "took over a 0.1.x box: imported token from bao.token (source lease from state.json); applied sha bbbbbbbbbbbb from state.json; 2 release(s) as applied before: aaaaaaaaaaaa, bbbbbbbbbbbb; state.json left as it was",
			source: "lease", applied: sha("b"), order: []string{sha("a"), sha("b")}},
		{name: "an unknown token source is taken as bootstrap", say: true,
			box:    Box{legacy: legacy("", "vault"), token: "t"},
			detail: `took over a 0.1.x box: imported token from bao.token (source unknown, taken as bootstrap); ignored: state.json token.source "vault" (not bootstrap or lease); state.json left as it was`,
			source: "bootstrap"},
		{name: "no state.json: the applied sha from current", say: true,
			box:     Box{current: "/d/releases/" + sha("c"), currentExists: true, releases: rels(sha("c"))},
			detail:  "a fresh state file: took what the box holds: applied sha cccccccccccc from current; 1 release(s) as applied before: cccccccccccc",
			applied: sha("c"), order: []string{sha("c")}},
		{name: "current that is not a release, an applied sha whose directory is gone", say: true,
			box:     Box{legacy: legacy(sha("d"), ""), current: "/elsewhere", tokenErr: errors.New("bao.token unreadable")},
			detail:  "took over a 0.1.x box: imported applied sha dddddddddddd from state.json; 1 release(s) as applied before: dddddddddddd; ignored: bao.token unreadable; current → /elsewhere, not a release; state.json left as it was",
			applied: sha("d"), order: []string{sha("d")}},
		{name: "a state file moved aside, nothing on the box", say: true,
			aside:  &store.MovedAside{Path: "/s/state.db.bad", Problem: "checksum"},
			detail: "started afresh: the state file was unusable (checksum) and is kept at /s/state.db.bad; nothing on the box to take"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := Decide(c.box, c.tokenStored, c.aside)
			if p.Say != c.say || p.Detail != c.detail {
				t.Fatalf("say %t %q\nwant %t %q", p.Say, p.Detail, c.say, c.detail)
			}
			if p.tokenSource != c.source || p.applied != c.applied {
				t.Fatalf("token source %q applied %q, want %q %q", p.tokenSource, p.applied, c.source, c.applied)
			}
			var order []string
			for _, r := range p.releases {
				order = append(order, r.Sha)
			}
			if strings.Join(order, ",") != strings.Join(c.order, ",") {
				t.Fatalf("releases %v, want %v", order, c.order)
			}
		})
	}
}
