package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tikali/monky-deployd/internal/testkit"
	"github.com/tikali/monky-deployd/store"
)

// TestUsageErrors: a usage error exits 1 with one stderr line naming what is wrong and the
// help to read, and prints nothing on stdout — never the whole help.
func TestUsageErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"nosuchcmd"}, `unknown command "nosuchcmd"; see 'monky-deployd help'`},
		{[]string{"--bogus", "status"}, `unknown flag --bogus; see 'monky-deployd help'`},
		{[]string{"status", "--bogus"}, `status: unknown flag --bogus; see 'monky-deployd help status'`},
		{[]string{"run", "--once", "--bogus"}, `run: unknown flag --bogus; see 'monky-deployd help run'`},
		{[]string{"run", "--once", "extra"}, `run: unexpected argument "extra"; see 'monky-deployd help run'`},
		{[]string{"status", "extra"}, `status: unexpected argument "extra"; see 'monky-deployd help status'`},
		{[]string{"resume", "x"}, `resume: unexpected argument "x"; see 'monky-deployd help resume'`},
		{[]string{"bootstrap", "x"}, `bootstrap: unexpected argument "x"; see 'monky-deployd help bootstrap'`},
		{[]string{"version", "x"}, `version: unexpected argument "x"; see 'monky-deployd help version'`},
		{[]string{"explain", "-n", "0"}, `explain: -n must be 1 or more (got 0); see 'monky-deployd help explain'`},
		{[]string{"explain", "-n", "-5"}, `explain: -n must be 1 or more (got -5); see 'monky-deployd help explain'`},
		{[]string{"explain", "-n", "abc"}, `explain: flag -n: invalid value "abc"; see 'monky-deployd help explain'`},
		{[]string{"explain", "-n"}, `explain: flag -n needs a value; see 'monky-deployd help explain'`},
		{[]string{"explain", "--since", "soon"}, `explain: flag --since: invalid value "soon"; see 'monky-deployd help explain'`},
		{[]string{"completion", "tcsh"}, `completion: name a shell: bash, zsh or fish (got "tcsh"); see 'monky-deployd help completion'`},
		{[]string{"completion", "bash", "zsh"}, `completion: unexpected argument "zsh"; see 'monky-deployd help completion'`},
		{[]string{"help", "nosuch"}, `unknown command "nosuch"; see 'monky-deployd help'`},
		{[]string{"hold", "--reason", "x"}, `hold: say how long with one of --for or --until (or end a hold with --release); see 'monky-deployd help hold'`},
		{[]string{"hold", "--for", "1h", "--until", "2026-12-06T08:00:00Z", "--reason", "x"}, `hold: say how long with one of --for or --until (or end a hold with --release); see 'monky-deployd help hold'`},
		{[]string{"hold", "--for", "1h"}, `hold: --reason is required: whoever finds the box held reads it; see 'monky-deployd help hold'`},
		{[]string{"hold", "--for", "-1h", "--reason", "x"}, `hold: --for must be positive (got -1h0m0s); see 'monky-deployd help hold'`},
		{[]string{"hold", "--until", "tomorrow", "--reason", "x"}, `hold: --until "tomorrow" is not an RFC 3339 time such as 2026-12-06T08:00:00Z; see 'monky-deployd help hold'`},
		{[]string{"hold", "--release", "--reason", "x"}, `hold: --release takes no --for, --until or --reason; see 'monky-deployd help hold'`},
	} {
		var out, errb bytes.Buffer
		code := run(append([]string{"monky-deployd"}, c.args...), &out, &errb)
		if code != 1 {
			t.Errorf("%q: exit %d, want 1", c.args, code)
		}
		if got, want := errb.String(), "monky-deployd: "+c.want+"\n"; got != want {
			t.Errorf("%q: stderr\n%q\nwant\n%q", c.args, got, want)
		}
		if out.Len() != 0 {
			t.Errorf("%q: stdout is not empty:\n%s", c.args, out.String())
		}
	}
}

// --version is `version`, whatever that prints.
func TestVersionFlag(t *testing.T) {
	var a, b, e bytes.Buffer
	if c := run([]string{"monky-deployd", "version"}, &a, &e); c != 0 {
		t.Fatalf("version: exit %d: %s", c, e.String())
	}
	if c := run([]string{"monky-deployd", "--version"}, &b, &e); c != 0 {
		t.Fatalf("--version: exit %d: %s", c, e.String())
	}
	if a.String() == "" || a.String() != b.String() {
		t.Errorf("--version printed %q, version %q", b.String(), a.String())
	}
}

// TestStatusExitCodes: 0 converged or working on it, 1 needs a person or no readable state
// file; --quiet prints nothing either way.
func TestStatusExitCodes(t *testing.T) {
	now := time.Now().UTC()
	for _, c := range []struct {
		name string
		rec  *store.Record // nil: no state file
		raw  string        // a damaged state file instead
		want int
		word string // in the human output
	}{
		{"converged", &store.Record{State: "Reported", AppliedSha: sha1, DesiredSha: sha1}, "", 0, "Reported"},
		{"in flight", &store.Record{State: "Pulled", Action: "apply", Sha: sha1, DesiredSha: sha1}, "", 0, "Pulled"},
		{"retrying", &store.Record{State: "Failed", Action: "apply", Sha: sha1, Attempts: map[string]int{"Up": 2}, NextRetryAt: now.Add(4 * time.Minute),
			Failure: &store.Failure{Code: "COMPOSE_UP_FAILED", Detail: "compose up: exit 1"}}, "", 0, "Failed"},
		{"refused", &store.Record{State: "Refused", Sha: sha1, Refusal: &store.Refusal{Sha: sha1, Code: "PRIVILEGED_REFUSED", Detail: "service api: privileged"}}, "", 1, "Refused"},
		{"blocked", &store.Record{State: "Blocked", Block: &store.Block{Code: "AGENT_ENV_MISMATCH", Detail: "token pinned to env-qa-03"}}, "", 1, "Blocked"},
		{"parked", &store.Record{State: "Failed", Action: "apply", Sha: sha1, Attempts: map[string]int{"Up": 5}, Parked: true,
			Failure: &store.Failure{Code: "COMPOSE_UP_FAILED", Detail: "compose up: exit 1"}}, "", 1, "Failed"},
		{"no state file", nil, "", 1, ""},
		{"unreadable state file", nil, "not a bbolt file, truncated", 1, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			stateDir := filepath.Join(dir, "state")
			if err := os.MkdirAll(stateDir, 0o700); err != nil {
				t.Fatal(err)
			}
			cfg := filepath.Join(dir, "config.yaml")
			testkit.WriteFile(t, cfg, "env_id: env-qa-02\nsite: cbs\ntransport: system\nstate_dir: "+stateDir+"\n", 0o600)
			if c.rec != nil {
				st, err := store.OpenBolt(filepath.Join(stateDir, "state.db"), store.BoltOptions{})
				if err != nil {
					t.Fatal(err)
				}
				c.rec.EnvID, c.rec.Tick, c.rec.LastTickAt = "env-qa-02", 3, now
				if err := st.Update(func(tx store.Tx) error { return tx.PutRecord(*c.rec) }); err != nil {
					t.Fatal(err)
				}
			}
			if c.raw != "" {
				testkit.WriteFile(t, filepath.Join(stateDir, "state.db"), c.raw, 0o600)
			}
			var out, errb bytes.Buffer
			if code := run([]string{"monky-deployd", "--config", cfg, "status"}, &out, &errb); code != c.want {
				t.Errorf("status: exit %d, want %d; stdout %s stderr %s", code, c.want, out.String(), errb.String())
			}
			if !strings.Contains(out.String(), c.word) {
				t.Errorf("status output lacks %q:\n%s", c.word, out.String())
			}
			out.Reset()
			errb.Reset()
			if code := run([]string{"monky-deployd", "--config", cfg, "status", "--json"}, &out, &errb); code != c.want {
				t.Errorf("status --json: exit %d, want %d", code, c.want)
			}
			out.Reset()
			errb.Reset()
			if code := run([]string{"monky-deployd", "--config", cfg, "status", "--quiet"}, &out, &errb); code != c.want {
				t.Errorf("status --quiet: exit %d, want %d", code, c.want)
			}
			if out.Len()+errb.Len() != 0 {
				t.Errorf("status --quiet printed %q %q", out.String(), errb.String())
			}
		})
	}
}

const sha1 = "7a10b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f"

// TestStatusHelpSaysExitCodes: `status --help` and the man page carry the exit codes.
func TestStatusHelpSaysExitCodes(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"monky-deployd", "status", "--help"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, w := range []string{"Exit status: 0 when the box is converged or working on it", "1 when it needs a person", "--quiet"} {
		if !strings.Contains(strings.Join(strings.Fields(out.String()), " "), w) {
			t.Errorf("status --help lacks %q:\n%s", w, out.String())
		}
	}
}
