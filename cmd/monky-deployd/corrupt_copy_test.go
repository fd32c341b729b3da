package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tikali/monky-deployd/store"
)

// TestExplainReadsACorruptCopy: explain and status on a moved-aside copy whose newest commit is
// broken read it through the older meta page, say so and that the box runs on a fresh file, and
// exit as the verdict says — never a panic, never "the next run moves it aside".
func TestExplainReadsACorruptCopy(t *testing.T) {
	t.Setenv("MONKY_DEPLOYD_CONFIG", filepath.Join(t.TempDir(), "absent", "config.yaml"))
	broken := brokenCopy(t, "failed-pull.db")
	path := filepath.Join(t.TempDir(), "state.db.corrupt-20261129T140000Z")
	if err := os.WriteFile(path, broken, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"explain", "status"} {
		var out, errb bytes.Buffer
		code := run([]string{"monky-deployd", cmd, "--state-file", path}, &out, &errb)
		got := out.String() + errb.String()
		if code > 1 || !strings.Contains(got, "older meta page") || !strings.Contains(got, "moved aside") ||
			strings.Contains(got, "moves it aside") || strings.Contains(got, "panic") || !strings.Contains(got, "COMPOSE_PULL_FAILED") {
			t.Errorf("%s: exit %d\n%s", cmd, code, got)
		}
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(after, broken) {
		t.Errorf("reading the corrupt copy changed it")
	}
}

// TestTriageReadsACorruptCopy: a moved-aside copy whose box is not among the copies is read as
// explain reads it: its row names the host and env the reading found (the boxes can be told
// apart), stays unreadable (it is not the box's present; a person looks) and says how it was
// read and that the box runs on a fresh file.
func TestTriageReadsACorruptCopy(t *testing.T) {
	t.Setenv("MONKY_DEPLOYD_CONFIG", filepath.Join(t.TempDir(), "absent", "config.yaml"))
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "state.db.corrupt-20261129T140000Z"), brokenCopy(t, "failed-pull.db"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	code := run([]string{"monky-deployd", "status", "--state-file", dir, "--json"}, &out, &errb)
	var rows []triageRow
	if err := json.Unmarshal(out.Bytes(), &rows); err != nil || len(rows) != 1 {
		t.Fatalf("exit %d: %v\n%s%s", code, err, out.String(), errb.String())
	}
	r := rows[0]
	if code != 1 || r.Verdict != verdictUnreadable || r.Host == "" || r.EnvID == "" || r.Who != "" ||
		!strings.Contains(r.Error, "older meta page") || !strings.Contains(r.Error, "moved aside") {
		t.Errorf("exit %d, row %+v", code, r)
	}
}

// brokenCopy is the support copy name with its newest commit's root page overwritten: bbolt
// refuses it, and it reads only through its older meta page.
func brokenCopy(t *testing.T, name string) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(supportDir, name))
	if err != nil {
		t.Fatal(err)
	}
	ne := binary.NativeEndian
	const ps = 4096
	txid := func(off int) uint64 { return ne.Uint64(raw[off+16+48:]) }
	root := func(off int) uint64 { return ne.Uint64(raw[off+16+16:]) }
	newest := 0
	if txid(ps) > txid(0) {
		newest = ps
	}
	broken := append([]byte(nil), raw...)
	r := int(root(newest))
	copy(broken[r*ps:(r+1)*ps], bytes.Repeat([]byte{0xff}, ps))
	return broken
}

// A copy that is no state file — a FIFO, a link to /dev/zero — is refused by explain and status
// with words that say so, before anything maps or reads it (a FIFO used to hang them, /dev/zero
// to grow them without bound).
func TestCopyThatIsNoFileIsRefused(t *testing.T) {
	t.Setenv("MONKY_DEPLOYD_CONFIG", filepath.Join(t.TempDir(), "absent", "config.yaml"))
	dir := t.TempDir()
	fifo := filepath.Join(dir, "state.db")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	zero := filepath.Join(dir, "zero.db")
	if err := os.Symlink("/dev/zero", zero); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{fifo, zero} {
		for _, cmd := range []string{"explain", "status"} {
			var out, errb bytes.Buffer
			code := run([]string{"monky-deployd", cmd, "--state-file", path}, &out, &errb)
			if got := out.String() + errb.String(); code != 1 || !strings.Contains(got, "is not a state file: not a regular file") {
				t.Errorf("%s %s: exit %d\n%s", cmd, filepath.Base(path), code, got)
			}
		}
	}
}

// A crafted copy's words never reach the terminal raw: every text form (explain, status, the
// triage) writes its ESC and BEL bytes as escapes; so does the closing line for its file name.
func TestCopyWordsAreEscapedForTheTerminal(t *testing.T) {
	t.Setenv("MONKY_DEPLOYD_CONFIG", filepath.Join(t.TempDir(), "absent", "config.yaml"))
	dir := t.TempDir()
	path := filepath.Join(dir, "state.db")
	st, err := store.OpenBolt(path, store.BoltOptions{})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	exit := 1
	if err := st.Update(func(tx store.Tx) error {
		rec := store.Record{EnvID: "env-\x1b]0;pwned\x07", State: "Failed", Tick: 1, Action: "apply", Sha: strings.Repeat("b", 64),
			Failure: &store.Failure{Sha: strings.Repeat("b", 64), Code: "COMPOSE_UP_FAILED", Detail: "compose up: \x1b[2J\x1b[31mboom\x07", State: "Pulled", At: at},
			Box:     store.Box{Host: "qa-\x1b[5mhost"}}
		if err := tx.PutRecord(rec); err != nil {
			return err
		}
		if _, err := tx.Append(store.Entry{Tick: 1, At: at, From: "Pulled", To: "Failed", Event: "fail", Code: "COMPOSE_UP_FAILED", Detail: "compose up: \x1b[2Jboom\x07"}); err != nil {
			return err
		}
		return tx.PutTick(store.TickSummary{Tick: 1, StartedAt: at, EndedAt: at, Exit: &exit})
	}); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"explain", "--state-file", path}, {"status", "--state-file", path}, {"status", "--state-file", dir}} {
		var out, errb bytes.Buffer
		run(append([]string{"monky-deployd"}, args...), &out, &errb)
		got := out.String() + errb.String()
		if strings.ContainsAny(got, "\x1b\x07") {
			t.Errorf("%v wrote raw ESC or BEL:\n%q", args, got)
		}
		if !strings.Contains(got, `\x1b`) {
			t.Errorf("%v does not show the escaped bytes:\n%s", args, got)
		}
	}
	var out, errb bytes.Buffer
	run([]string{"monky-deployd", "explain", "--state-file", filepath.Join(dir, "no\x1b[2Jsuch.db")}, &out, &errb)
	if got := out.String() + errb.String(); strings.ContainsAny(got, "\x1b\x07") {
		t.Errorf("a file name reached the terminal raw: %q", got)
	}
}
