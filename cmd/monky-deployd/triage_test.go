package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
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
	whoRank := map[string]int{"box": 0, "publisher": 1, "openbao": 2, "tenancy": 3, "-": 4}
	type key struct{ verdict, who int }
	var last key
	lastSince, rollback := "", ""
	for _, l := range lines[1 : len(lines)-1] {
		f := strings.Fields(l)
		if strings.Contains(l, "junk.db") {
			continue // its error's words are its codes
		}
		// FILE HOST ENV VERDICT WHO CODES SINCE PARKS
		r, ok := rank[f[3]]
		k := key{r, whoRank[f[4]]}
		since := f[6]
		if !ok || len(f) != 8 || k.verdict < last.verdict || (k.verdict == last.verdict && k.who < last.who) ||
			(k == last && since != "-" && lastSince != "-" && since < lastSince) {
			t.Errorf("row out of order (who must act, then the oldest fault first) or without a verdict: %s", l)
		}
		if k != last {
			lastSince = ""
		}
		last, lastSince = k, since
		if strings.Contains(f[0], "refused-rollback") {
			rollback = l
		}
	}
	if f := strings.Fields(rollback); len(f) != 8 || f[1] != "box-1" || f[2] != "env-qa-02" || f[3] != "needs_person" || f[4] != "publisher" || f[5] != "ROLLBACK_REFUSED" || !strings.HasPrefix(f[6], "2026-") {
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

// TestTriageFilesAMovedAsideCopyUnderItsBox: a `*.corrupt-*` file the agent moved aside is
// listed under the box whose state file it was, not counted as a box of its own; one whose box
// is not among the copies stays a row.
func TestTriageFilesAMovedAsideCopyUnderItsBox(t *testing.T) {
	t.Setenv("MONKY_DEPLOYD_CONFIG", filepath.Join(t.TempDir(), "absent", "config.yaml"))
	dir := t.TempDir()
	raw, err := os.ReadFile(filepath.Join(supportDir, "moved-aside.db"))
	if err != nil {
		t.Fatal(err)
	}
	box := filepath.Join(dir, "box-a")
	if err := os.MkdirAll(box, 0o700); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(box, "state.db"), raw, 0o600)
	os.WriteFile(filepath.Join(box, "state.db.corrupt-20261129T140000Z"), []byte("not a bolt file"), 0o600)
	var out, errb bytes.Buffer
	if code := run([]string{"monky-deployd", "status", "--state-file", dir}, &out, &errb); code != 0 {
		t.Fatalf("exit %d, want 0 (the box is converged; its moved-aside copy is no box)\n%s%s", code, out.String(), errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 4 || !strings.Contains(lines[2], "state.db.corrupt-20261129T140000Z") || !strings.Contains(lines[2], "moved aside") ||
		!strings.Contains(lines[3], "1 box(es)") {
		t.Errorf("the moved-aside copy is not filed under its box:\n%s", out.String())
	}
	var rows []triageRow
	out.Reset()
	run([]string{"monky-deployd", "status", "--state-file", dir, "--json"}, &out, &errb)
	if err := json.Unmarshal(out.Bytes(), &rows); err != nil || len(rows) != 1 || len(rows[0].MovedAside) != 1 {
		t.Errorf("--json: %v %+v", err, rows)
	}
}

// TestTriageHonoursAsOf: --as-of reads every copy of a directory or a list as of that time — a
// box whose timer stopped reads stale — whether the flag comes before or after the paths.
func TestTriageHonoursAsOf(t *testing.T) {
	t.Setenv("MONKY_DEPLOYD_CONFIG", filepath.Join(t.TempDir(), "absent", "config.yaml"))
	dir := t.TempDir()
	for _, n := range []string{"stale-box", "failed-pull"} {
		raw, err := os.ReadFile(filepath.Join(supportDir, n+".db"))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, n+".db"), raw, 0o600)
	}
	later := "2026-12-01T00:00:00Z"
	for _, args := range [][]string{
		{"--state-file", dir},
		{"--as-of", later, "--state-file", dir},
		{"--state-file", filepath.Join(dir, "stale-box.db"), filepath.Join(dir, "failed-pull.db"), "--as-of", later},
	} {
		var out, errb bytes.Buffer
		code := run(append([]string{"monky-deployd", "status"}, args...), &out, &errb)
		asOf := slices.Contains(args, "--as-of")
		stale := strings.Contains(out.String(), "TICKS_STOPPED")
		if asOf != stale || (asOf && code != 1) {
			t.Errorf("%v: exit %d, stale %v:\n%s%s", args, code, stale, out.String(), errb.String())
		}
	}
}
