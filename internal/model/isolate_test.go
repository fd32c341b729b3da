package model

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tikali/monky-deployd/internal/budget"
	"github.com/tikali/monky-deployd/internal/bundle"
	"github.com/tikali/monky-deployd/internal/vocab"
)

const benignCompose = "services:\n  web:\n    image: nginx\n    volumes: ['./assets:/usr/share/nginx/html:ro']\n"

// A benign release whose bundle holds 60 MiB of files besides its compose file applies: the
// loader child reads what compose reads, one file at a time, and the assets never count against
// its memory (before, every file crossed to the child on its stdin and a bundle of 16–24 MiB
// was refused for good, blaming the compose file).
func TestLargeBenignBundleLoads(t *testing.T) {
	for name, files := range map[string]map[string]string{
		"60 text assets of 1 MiB": func() map[string]string {
			m := map[string]string{}
			line := strings.Repeat("body { color: red; }\n", 50)
			for i := 0; i < 60; i++ {
				m["assets/"+string(rune('a'+i/26))+string(rune('a'+i%26))+".css"] = strings.Repeat(line, (1<<20-64)/len(line))
			}
			return m
		}(),
	} {
		t.Run(name, func(t *testing.T) {
			files["compose.yaml"] = benignCompose
			b := bundleWith(t, files)
			if r := Check(b, CheckInput{DesiredSha: b.Sha, EnvID: env}); r != nil {
				t.Fatalf("refused: %v", r)
			}
		})
	}
}

// A loader child killed while it loads leaves no scratch copy behind: the parent writes the
// copy and removes it, whatever became of the child (a killed process runs no defer). The tick
// is cancelled the moment the copy's compose file appears.
func TestKilledLoaderLeavesNoScratch(t *testing.T) {
	var compose strings.Builder
	compose.WriteString("services:\n")
	for i := 0; i < 900; i++ {
		fmt.Fprintf(&compose, "  s%d:\n    image: busybox\n    command: [sh, -c, 'echo ${X:-%d}']\n    environment: {A: '%d', B: b}\n", i, i, i)
	}
	scratch := t.TempDir()
	b := bundleWith(t, map[string]string{"compose.yaml": compose.String(), "notes.txt": "kept in the copy"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	seen := make(chan struct{})
	go func() {
		defer close(seen)
		for ctx.Err() == nil {
			found := false
			_ = filepath.WalkDir(scratch, func(p string, d fs.DirEntry, err error) error {
				found = found || (err == nil && d.Name() == "compose.yaml")
				return nil
			})
			if found {
				cancel()
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	err := CheckContext(ctx, b, CheckInput{DesiredSha: b.Sha, EnvID: env, Compose: ComposeEnv{ScratchDir: scratch}})
	<-seen
	if !errors.Is(err, budget.ErrCancelled) {
		t.Fatalf("got %v, want the load cancelled", err)
	}
	left, err := os.ReadDir(scratch)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Fatalf("the scratch directory holds %d entries after the child was killed: %v", len(left), left[0].Name())
	}
}

// env_file contents are decided before any lease, by the check (and so by `check bundle`): a
// file compose cannot read, or one missing, is BUNDLE_INVALID at the check, not after the lease
// and the secret reads at the stage. The `.env` the stage writes is there, its secrets as
// placeholders, and a file withheld by its size is left to the stage.
func TestEnvFileContentsCheckedBeforeLease(t *testing.T) {
	svc := func(files string) string {
		return "services:\n  api:\n    image: x\n    env_file: [" + files + "]\n"
	}
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  string // "" loads
	}{
		{"unterminated quote", map[string]string{"compose.yaml": svc("app.env"), "app.env": "A=\"open\n"}, "does not load with its env_file"},
		{"missing", map[string]string{"compose.yaml": svc("gone.env")}, "gone.env"},
		{"benign", map[string]string{"compose.yaml": svc("app.env"), "app.env": "A=1\nB=${B_DEFAULT:-x}\n"}, ""},
		{"the rendered .env", map[string]string{"compose.yaml": svc(".env"), bundle.TemplateFile: "TOKEN=${TOKEN}\nMODE=prod\n",
			bundle.ManifestFile: `{"entries":[{"var":"TOKEN","path":"monky/data/` + env + `/see/api","key":"token"}]}`}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := bundleWith(t, tc.files)
			r := Check(b, CheckInput{DesiredSha: b.Sha, EnvID: env})
			switch {
			case tc.want == "" && r != nil:
				t.Fatalf("refused: %v", r)
			case tc.want != "" && (r == nil || r.Code != vocab.BundleInvalid || !strings.Contains(r.Detail, tc.want)):
				t.Fatalf("got %v, want BUNDLE_INVALID naming %q", r, tc.want)
			}
		})
	}
}
