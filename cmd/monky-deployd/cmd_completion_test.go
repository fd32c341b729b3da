package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/tikali/monky-deployd/internal/testkit"
)

// snapshot is what a command that acts would change: every file of the box (agent state,
// kit, grant, docker stub state and call log) with its mode and content, and the simulator's
// request counts.
func (b *box) snapshot() (map[string]string, testkit.SimCounts) {
	b.T.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(b.Dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == filepath.Join(b.Dir, "sim.log") {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		v := fi.Mode().String()
		if fi.Mode().IsRegular() {
			raw, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(raw)
			v += " " + hex.EncodeToString(sum[:])
		}
		files[p] = v
		return nil
	})
	if err != nil {
		b.T.Fatal(err)
	}
	return files, b.Counts()
}

func diffFiles(before, after map[string]string) []string {
	var d []string
	for p, v := range before {
		if after[p] != v {
			d = append(d, p+": "+v+" → "+after[p])
		}
	}
	for p := range after {
		if _, ok := before[p]; !ok {
			d = append(d, p+": new")
		}
	}
	sort.Strings(d)
	return d
}

// TestCompletionNeverActs asks for completions the way each shell script does, for every
// command, on a box where every command would change something (a refused flight for resume,
// a grant on disk for bootstrap, a desired sha for run), plus the requests a script of an older
// release sends (urfave/cli's --generate-bash-completion, also after `--`, which the library
// itself hands to the command as an argument). Nothing may reach the simulator, docker or the
// box's files, and the grant stays.
func TestCompletionNeverActs(t *testing.T) {
	b := startBox(t)
	b.Desire("v1")
	b.tick(0)
	b.Desire("v2")
	b.tick(0)
	b.Desire("v1")
	b.tick(1) // ROLLBACK_REFUSED: `resume` would clear it
	grant := filepath.Join(b.Kit, "bootstrap.jwt")
	testkit.WriteFile(t, grant, b.Grant+"\n", 0o600) // `bootstrap` would spend it
	b.Desire("v2")                                   // `run` would check in and converge

	bin := testkit.Bin("monky-deployd")
	scripts := map[string]string{}
	for _, sh := range []string{"bash", "zsh", "fish"} {
		r := b.Run("monky-deployd", nil, "completion", sh)
		o := r.Stdout
		if r.Code != 0 {
			t.Fatalf("completion %s: exit %d: %s", sh, r.Code, r.Stderr)
		}
		if !strings.Contains(o, "__complete --") || strings.Contains(o, legacyCompletionFlag) {
			t.Fatalf("the %s script does not ask `__complete --`:\n%s", sh, o)
		}
		p := filepath.Join(t.TempDir(), "completion."+sh)
		testkit.WriteFile(t, p, o, 0o600)
		scripts[sh] = p
	}
	// a command that acted would act on this box
	env := append(os.Environ(), "MONKY_DEPLOYD_CONFIG="+b.Config(), "NO_COLOR=1",
		"FAKE_DOCKER_LOG="+b.DockerLog, "FAKE_DOCKER_STATE="+b.DockerState, "PATH="+testkit.BinDir()+":"+os.Getenv("PATH"))
	exe := func(name string, args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Env = env
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		if ctx.Err() != nil {
			t.Fatalf("%s %q did not return: a completion request ran a command", name, args)
		}
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatalf("%s %q: %v", name, args, err)
		}
		if err != nil {
			t.Errorf("%s %q: %v; stderr %s", name, args, err, errb.String())
		}
		return out.String()
	}
	files, counts := b.snapshot()

	cmds := []string{"run", "status", "explain", "resume", "bootstrap", "diagram", "version", "completion", "help", "man"}
	wantFlag := map[string]string{"run": "--once", "status": "--json", "explain": "--ndjson", "resume": "--now", "bootstrap": "--force"}
	// without zsh or fish, the request their scripts send is run directly below
	zsh := testkit.Tool(t, "zsh", "zsh", "the zsh completion script run by zsh")
	fish := testkit.Tool(t, "fish", "fish", "the fish completion script run by fish")
	for _, c := range cmds {
		for _, cur := range []string{"", "--"} {
			// bash, zsh and fish themselves, running the script's function
			got := exe("bash", "-c", `source "$1"; COMP_WORDS=("$2" "$3" "$4"); COMP_CWORD=2; _monky_deployd; printf '%s\n' "${COMPREPLY[@]}"`,
				"bash", scripts["bash"], bin, c, cur)
			if w := wantFlag[c]; w != "" && cur == "--" && !strings.Contains(got, w+"\n") {
				t.Errorf("bash: %s --<TAB> lacks %s: %q", c, w, got)
			}
			if zsh != "" {
				got := exe(zsh, "-f", "-c", `compdef() { :; }; compadd() { [[ $1 == -- ]] && shift; print -l -- "$@"; }; _files() { :; }
source "$1"; words=("$2" "$3" "$4"); CURRENT=3; _monky-deployd`, "zsh", scripts["zsh"], bin, c, cur)
				if w := wantFlag[c]; w != "" && cur == "--" && !strings.Contains(got, w+"\n") {
					t.Errorf("zsh: %s --<TAB> lacks %s: %q", c, w, got)
				}
			}
			if fish != "" {
				got := exe(fish, "--no-config", "-c", `source $argv[1]; complete -C "monky-deployd $argv[2] $argv[3]"`, scripts["fish"], c, cur)
				if w := wantFlag[c]; w != "" && cur == "--" && !strings.Contains(got, w) {
					t.Errorf("fish: %s --<TAB> lacks %s: %q", c, w, got)
				}
			}
			// the request every script sends
			exe(bin, "__complete", "--", c, cur)
			// an older release's scripts
			exe(bin, c, cur, legacyCompletionFlag)
		}
		exe(bin, c, "--", legacyCompletionFlag)
		exe(bin, "--config", b.Config(), c, "--", legacyCompletionFlag)
	}
	if got := exe(bin, "run", "--", legacyCompletionFlag); got != "" {
		t.Errorf("run -- %s printed %q", legacyCompletionFlag, got)
	}

	after, counts2 := b.snapshot()
	if counts2 != counts {
		t.Errorf("completion reached the simulator: %+v → %+v", counts, counts2)
	}
	if d := diffFiles(files, after); len(d) > 0 {
		t.Errorf("completion changed the box:\n%s", strings.Join(d, "\n"))
	}
	if raw, err := os.ReadFile(grant); err != nil || strings.TrimSpace(string(raw)) != b.Grant {
		t.Errorf("the grant was consumed: %v", err)
	}
	if d := b.explainJSON(); d.State != "Refused" {
		t.Errorf("state after completion %s, want Refused", d.State)
	}
}

// TestCompletionWords pins what the scripts are offered, from the command definitions.
func TestCompletionWords(t *testing.T) {
	app := newApp(&bytes.Buffer{}, &bytes.Buffer{})
	for _, c := range []struct {
		words []string
		want  string
	}{
		{[]string{""}, "run status explain resume hold bootstrap enroll diagram check version completion purge help"},
		{[]string{"check", ""}, "config bundle"},
		{[]string{"check", "bundle", "--"}, "--env --allow-rollback --kv-mount --max-bytes --help"},
		{[]string{"check", "bundle", "--env", ""}, ""},
		{[]string{"ex"}, "explain"},
		{[]string{"-"}, "--config --version --help"},
		{[]string{"--config", "/etc/x.yaml", "st"}, "status"},
		{[]string{"--config", ""}, ""},
		{[]string{"explain", "--"}, "--json --ndjson --since --state-file --as-of --help"},
		{[]string{"explain", "-"}, "--json --ndjson -n --since --state-file --as-of --help"},
		{[]string{"explain", "--state-file", ""}, ""},
		{[]string{"status", "-"}, "--json --quiet -q --state-file --as-of --help"},
		{[]string{"completion", ""}, "bash zsh fish"},
		{[]string{"help", "re"}, "resume"},
		{[]string{"hold", "--"}, "--for --until --reason --release --help"},
		{[]string{"nosuch", ""}, ""},
		{[]string{"man", ""}, ""},
	} {
		got := strings.Join(completions(app, c.words), " ")
		if got != c.want {
			t.Errorf("completions %q = %q, want %q", c.words, got, c.want)
		}
	}
	for _, c := range []struct {
		args  []string
		words string
		ok    bool
	}{
		{[]string{"m", "__complete", "--", "run", "--"}, "run --", true},
		{[]string{"m", "__complete"}, "", true},
		{[]string{"m", "run", "--generate-bash-completion"}, "run ", true},
		{[]string{"m", "run", "--", "--generate-bash-completion"}, "run ", true},
		{[]string{"m", "run", "--on", "--generate-bash-completion"}, "run --on", true},
		{[]string{"m", "run", "--once"}, "", false},
	} {
		w, ok := completionRequest(c.args)
		if ok != c.ok || strings.Join(w, " ") != c.words {
			t.Errorf("completionRequest(%q) = %q, %v; want %q, %v", c.args, w, ok, c.words, c.ok)
		}
	}
}
