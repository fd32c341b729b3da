package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Support triage: `status --state-file DIR` reads every copy under DIR (one directory per box,
// or files side by side) and prints one line per box — file, env, verdict, codes, since — the
// ones that need a person first, then those it cannot read, then the rest; --json prints the same
// rows; exit 1 since some need a person; nothing is written anywhere.
func TestStatusTriagesACorpusOfCopies(t *testing.T) {
	t.Setenv("MONKY_DEPLOYD_CONFIG", filepath.Join(t.TempDir(), "absent", "config.yaml"))
	dir := t.TempDir()
	files := supportFiles(t)
	for i, src := range files {
		raw, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(dir, filepath.Base(src))
		if i%2 == 0 { // half of them as a box's own directory with its state.db
			dst = filepath.Join(dir, strings.TrimSuffix(filepath.Base(src), ".db"), "state.db")
			if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(dst, raw, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(dir, "junk.db"), []byte("not a state file"), 0o600)
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("the ticket's notes"), 0o600)
	before := dirState(t, dir)

	var out, errb bytes.Buffer
	if code := run([]string{"monky-deployd", "status", "--state-file", dir}, &out, &errb); code != 1 {
		t.Fatalf("exit %d, want 1 (boxes need a person); stderr %s", code, errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != len(files)+3 || !strings.HasPrefix(lines[0], "FILE") {
		t.Fatalf("%d lines for %d copies and a junk file:\n%s", len(lines), len(files), out.String())
	}
	rank := map[string]int{"needs_person": 0, "unreadable": 1, "working": 2, "converged": 3}
	last, rollback := -1, ""
	for _, l := range lines[1 : len(lines)-1] {
		f := strings.Fields(l)
		r, ok := rank[f[2]]
		if !ok || r < last {
			t.Errorf("row out of order or without a verdict: %s", l)
		}
		last = r
		if strings.Contains(f[0], "refused-rollback") {
			rollback = l
		}
	}
	if f := strings.Fields(rollback); len(f) != 5 || f[1] != "env-qa-02" || f[2] != "needs_person" || f[3] != "ROLLBACK_REFUSED" || !strings.HasPrefix(f[4], "2026-") {
		t.Errorf("the rollback copy's row: %q", rollback)
	}
	if !strings.Contains(out.String(), "junk.db") || !strings.Contains(lines[len(lines)-1], "unreadable 1") {
		t.Errorf("the junk file is not listed unreadable:\n%s", out.String())
	}
	if strings.Contains(out.String(), "notes.txt") {
		t.Errorf("a file that is no copy was read")
	}

	out.Reset()
	if code := run([]string{"monky-deployd", "status", "--state-file", dir, "--json"}, &out, &errb); code != 1 {
		t.Fatalf("--json: exit %d", code)
	}
	var rows []triageRow
	if err := json.Unmarshal(out.Bytes(), &rows); err != nil || len(rows) != len(files)+1 {
		t.Fatalf("--json: %v, %d rows:\n%s", err, len(rows), out.String())
	}
	if rows[0].Verdict != "needs_person" || rows[0].EnvID == "" || len(rows[0].Codes) == 0 || rows[0].Since == "" {
		t.Errorf("first row %+v", rows[0])
	}
	if after := dirState(t, dir); after != before {
		t.Errorf("triage wrote under the copies:\nbefore\n%s\nafter\n%s", before, after)
	}

	// several files name the copies one by one; one working copy alone exits 0
	out.Reset()
	a, b := filepath.Join(dir, "repeated-75", "state.db"), filepath.Join(dir, "kv-read-503.db")
	if _, err := os.Stat(a); err != nil {
		a = filepath.Join(dir, "repeated-75.db")
	}
	if _, err := os.Stat(b); err != nil {
		b = filepath.Join(dir, "kv-read-503", "state.db")
	}
	if code := run([]string{"monky-deployd", "status", "--state-file", a, b}, &out, &errb); code != 0 ||
		strings.Count(out.String(), "\n") != 4 || !strings.Contains(out.String(), "2 box(es): working 2") {
		t.Errorf("two working copies: exit %d\n%s%s", code, out.String(), errb.String())
	}
}
