package releases

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/distribution/reference"

	"github.com/tikali/monky-deployd/internal/budget"
)

func TestPlan(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(h int) time.Time { return t0.Add(time.Duration(h) * time.Hour) }
	for _, c := range []struct {
		name       string
		dirs       []Dir
		protected  []string
		keep       int
		kept, gone []string
	}{
		{name: "nothing", keep: 3},
		{name: "within keep", dirs: []Dir{{Name: "a", Applied: at(1)}, {Name: "b", Applied: at(2)}}, keep: 3, kept: []string{"b", "a"}},
		{name: "oldest applied goes first",
			dirs: []Dir{{Name: "a", Applied: at(1)}, {Name: "b", Applied: at(3)}, {Name: "c", Applied: at(2)}},
			keep: 2, kept: []string{"b", "c"}, gone: []string{"a"}},
		{name: "protected count against keep and never go",
			dirs:      []Dir{{Name: "old", Applied: at(1)}, {Name: "b", Applied: at(3)}, {Name: "c", Applied: at(2)}},
			protected: []string{"old"}, keep: 2, kept: []string{"old", "b"}, gone: []string{"c"}},
		{name: "more protected than keep",
			dirs:      []Dir{{Name: "a", Applied: at(1)}, {Name: "b", Applied: at(2)}, {Name: "c", Applied: at(3)}},
			protected: []string{"a", "b"}, keep: 1, kept: []string{"a", "b"}, gone: []string{"c"}},
		{name: "never applied is the oldest, then by directory time, then by name",
			dirs: []Dir{{Name: "x", Mod: at(9)}, {Name: "y", Mod: at(8)}, {Name: "z", Mod: at(8)}, {Name: "a", Applied: at(1), Mod: at(0)}},
			keep: 2, kept: []string{"a", "x"}, gone: []string{"z", "y"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := map[string]bool{}
			for _, s := range c.protected {
				p[s] = true
			}
			kept, gone := Plan(c.dirs, p, c.keep)
			if !slices.Equal(kept, c.kept) || !slices.Equal(gone, c.gone) {
				t.Fatalf("kept %v gone %v, want kept %v gone %v", kept, gone, c.kept, c.gone)
			}
		})
	}
}

func TestImages(t *testing.T) {
	named := func(refs ...string) []reference.Named {
		var out []reference.Named
		for _, r := range refs {
			n, err := reference.ParseNormalizedNamed(r)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, n)
		}
		return out
	}
	for _, c := range []struct {
		name       string
		used, have []string
		remove     []string
	}{
		{name: "an older tag of a kept repository goes",
			used: []string{"harbor.example/monky/api:r2"}, have: []string{"harbor.example/monky/api:r1", "harbor.example/monky/api:r2"},
			remove: []string{"harbor.example/monky/api:r1"}},
		{name: "other repositories stay",
			used: []string{"harbor.example/monky/api:r2"}, have: []string{"postgres:16", "harbor.example/other/tool:r1"}},
		{name: "no tag means latest",
			used: []string{"nginx"}, have: []string{"nginx:latest", "nginx:1.27"}, remove: []string{"nginx:1.27"}},
		{name: "docker hub names compare as docker resolves them",
			used: []string{"docker.io/library/redis:7"}, have: []string{"redis:7", "redis:6", "library/redis:5"}, remove: []string{"redis:6", "library/redis:5"}},
		{name: "a name docker lists that does not parse stays",
			used: []string{"nginx:1"}, have: []string{"NGINX:old", "nginx:2"}, remove: []string{"nginx:2"}},
		{name: "nothing used, nothing removed", have: []string{"nginx:1"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := Images(named(c.used...), c.have); !slices.Equal(got, c.remove) {
				t.Fatalf("remove %v, want %v", got, c.remove)
			}
		})
	}
}

// The images of a release are its compose model's, as compose resolves them: a variable from
// the release's .env, and a service of a profile compose is not asked for, are both counted.
func TestReleaseImages(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "releases", "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("bundle.json", `{"env_id": "e", "compose_file": "app.yaml"}`)
	write("app.yaml", "services:\n  api:\n    image: harbor.example/monky/api:${TAG}\n  tool:\n    image: busybox\n    profiles: [tools]\n  built:\n    build: .\n")
	write(".env", "TAG=r7\n")
	before := budget.Started()
	got, err := ReleaseImages(context.Background(), dir, "proj")
	if err != nil {
		t.Fatal(err)
	}
	if budget.Started() != before+1 {
		t.Errorf("the model was not loaded in a loader child")
	}
	var s []string
	for _, n := range got {
		s = append(s, n.String())
	}
	if want := []string{"harbor.example/monky/api:r7", "docker.io/library/busybox"}; !slices.Equal(s, want) {
		t.Fatalf("images %v, want %v", s, want)
	}
	write("app.yaml", "services:\n  api:\n    image: 'Not A Name'\n")
	if _, err := ReleaseImages(context.Background(), dir, "proj"); err == nil {
		t.Fatal("an image name that does not parse was taken")
	}
}

// A kept release whose model costs more than the loader child's budget (a release applied
// before the bounds were counted: one 400 KiB scalar aliased 2,000 times, which interpolation
// copies) stops the prune's image removal with the bound's words; the agent's own process never
// loads it.
func TestReleaseImagesIsBounded(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "releases", "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString("x-wide: &w \"" + strings.Repeat("w", 400<<10) + "\"\nx-many:\n")
	for range 2000 {
		b.WriteString("  - *w\n")
	}
	b.WriteString("services:\n  api:\n    image: busybox\n")
	if err := os.WriteFile(filepath.Join(dir, "compose.yaml"), []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := ReleaseImages(context.Background(), dir, "proj")
	if err == nil || !strings.Contains(err.Error(), "a bound for loading a release's model") {
		t.Fatalf("error %v, want the loader's bound", err)
	}
}
