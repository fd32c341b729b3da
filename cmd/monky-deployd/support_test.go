package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tikali/monky-deployd/internal/config"
	"github.com/tikali/monky-deployd/internal/testkit"
	"github.com/tikali/monky-deployd/machine/explain"
	"github.com/tikali/monky-deployd/machine/metrics"
	"github.com/tikali/monky-deployd/store"
)

var updateSupport = flag.Bool("update", false, "rewrite testdata/support/*.{explain,status}.txt from the corpus")

const supportDir = "../../testdata/support"

// dirState is every file under dir with its mode, size, time and content hash.
func dirState(t *testing.T, dir string) string {
	t.Helper()
	var lines []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		sum := ""
		if info.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum = fmt.Sprintf("%x", sha256.Sum256(b))
		}
		lines = append(lines, fmt.Sprintf("%s %v %d %d %s", p, info.Mode(), info.Size(), info.ModTime().UnixNano(), sum))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func supportFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(supportDir, "*.db"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 15 {
		t.Fatalf("the support corpus holds %d state files, want at least 15 (go test ./states -run SupportCorpus -update-support)", len(files))
	}
	return files
}

// TestSupportCorpusGoldens reads every state file of the support corpus as support does — a
// copy, no config — with explain and status, compares the words with the goldens, checks the
// last lines name the code and what happens next, and that nothing was written anywhere.
// convergedCopies are the copies of boxes converged since their trouble, with what their outputs
// must say and must not: a box that started afresh after its state file was moved aside names
// that file (status and explain); a refused sha that applied after the config lowered
// disk.headroom_bytes says so in its journal, not that space was freed.
var convergedCopies = map[string]struct {
	words, not string
	outputs    []string
}{
	"moved-aside":              {".corrupt-", "\x00", []string{"status", "explain", "status --json"}},
	"recheck-headroom-lowered": {"the disk check passes now (", "space freed", []string{"explain"}},
}

func TestSupportCorpusGoldens(t *testing.T) {
	// no config may be read: one that cannot be
	t.Setenv("MONKY_DEPLOYD_CONFIG", filepath.Join(t.TempDir(), "absent", "config.yaml"))
	corpusBefore := dirState(t, supportDir)
	for _, src := range supportFiles(t) {
		name := strings.TrimSuffix(filepath.Base(src), ".db")
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			copyPath := filepath.Join(dir, "state.db")
			raw, err := os.ReadFile(src)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(copyPath, raw, 0o600); err != nil {
				t.Fatal(err)
			}
			cwd, _ := os.Getwd()
			before := dirState(t, dir)
			outputs := map[string]string{}
			// a copy sent some time after its newest tick is read as of then (<name>.asof)
			var asOf []string
			if raw, err := os.ReadFile(strings.TrimSuffix(src, ".db") + ".asof"); err == nil {
				asOf = []string{"--as-of", strings.TrimSpace(string(raw))}
			}
			statusExits := map[int]bool{}
			for _, args := range [][]string{
				{"explain", "--state-file", copyPath},
				{"explain", "--json", "--state-file", copyPath},
				{"status", "--state-file", copyPath},
				{"status", "--json", "--state-file", copyPath},
				{"status", "--quiet", "--state-file", copyPath},
			} {
				var out, errb bytes.Buffer
				code := run(append(append([]string{"monky-deployd"}, args...), asOf...), &out, &errb)
				if args[0] == "status" {
					statusExits[code] = true // 1 for a box that needs a person: checked below
					code = 0
				}
				if code != 0 || (errb.Len() > 0 && args[0] != "status") {
					t.Fatalf("%v: exit %d, stderr %s", args, code, errb.String())
				}
				outputs[strings.Join(args[:len(args)-2], " ")] = strings.ReplaceAll(out.String(), copyPath, "state.db")
			}
			if after := dirState(t, dir); after != before {
				t.Errorf("reading a copy changed its directory:\n--- before\n%s\n--- after\n%s", before, after)
			}
			if wd, _ := os.Getwd(); wd != cwd {
				t.Errorf("the working directory changed")
			}
			// one verdict on every surface: explain --json, status --json, status's exit code (all
			// three forms), and the metrics the agent would write from this file
			var verdicts struct {
				Verdict string `json:"verdict"`
			}
			var sv struct {
				Verdict string `json:"verdict"`
			}
			if err := json.Unmarshal([]byte(outputs["explain --json"]), &verdicts); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal([]byte(outputs["status --json"]), &sv); err != nil {
				t.Fatal(err)
			}
			needs := verdicts.Verdict == explain.NeedsPerson
			if sv.Verdict != verdicts.Verdict || len(statusExits) != 1 || statusExits[1] != needs {
				t.Errorf("explain's verdict %s, status's %s, status exits %v", verdicts.Verdict, sv.Verdict, statusExits)
			}
			if m := copyMetrics(t, src, asOf); (m == 1) != needs {
				t.Errorf("monky_deployd_needs_person %v for verdict %s", m, verdicts.Verdict)
			}
			var doc struct {
				Next string `json:"next"`
				Why  *struct {
					Code, Next, Fix string
				} `json:"why"`
			}
			if err := json.Unmarshal([]byte(outputs["explain --json"]), &doc); err != nil {
				t.Fatal(err)
			}
			if c, ok := convergedCopies[name]; ok && doc.Why == nil {
				// a box converged since its trouble: no why, but its outputs still name what happened
				for _, o := range c.outputs {
					if !strings.Contains(outputs[o], c.words) || strings.Contains(outputs[o], c.not) {
						t.Errorf("%s does not say %q (or says %q):\n%s", o, c.words, c.not, outputs[o])
					}
				}
				supportGolden(t, name+".explain.txt", outputs["explain"])
				supportGolden(t, name+".status.txt", outputs["status"])
				return
			}
			if doc.Why == nil || doc.Why.Code == "" || doc.Why.Next == "" || doc.Why.Fix == "" {
				t.Fatalf("a box in trouble without a why block: %s", outputs["explain --json"])
			}
			if strings.HasPrefix(doc.Next, "converged") {
				t.Errorf("a box in trouble reads next %q", doc.Next)
			}
			// the lines after the journal name the code, what happens next and the fix
			_, tail, _ := strings.Cut(outputs["explain"], "\nstate: ")
			for _, want := range []string{"why: " + doc.Why.Code, "  next:", "  fix:"} {
				if !strings.Contains(tail, want) {
					t.Errorf("explain's last lines lack %q:\n%s", want, tail)
				}
			}
			if !strings.Contains(outputs["status"], "!! "+doc.Why.Code) || !strings.Contains(outputs["status"], "a copy, read as of ") {
				t.Errorf("status does not lead with the code or does not say it reads a copy:\n%s", outputs["status"])
			}
			var st struct {
				Converged bool `json:"converged"`
				Why       *struct{ Code string }
			}
			if err := json.Unmarshal([]byte(outputs["status --json"]), &st); err != nil {
				t.Fatal(err)
			}
			if st.Converged || st.Why == nil || st.Why.Code != doc.Why.Code {
				t.Errorf("status --json converged=%v why=%+v; explain names %s", st.Converged, st.Why, doc.Why.Code)
			}
			supportGolden(t, name+".explain.txt", outputs["explain"])
			supportGolden(t, name+".status.txt", outputs["status"])
		})
	}
	if after := dirState(t, supportDir); !*updateSupport && after != corpusBefore {
		t.Errorf("the corpus directory changed while it was read")
	}
}

// copyMetrics writes, from a copy of src read as of its newest tick (or --as-of), the metrics
// file the agent writes after a tick, and returns its monky_deployd_needs_person.
func copyMetrics(t *testing.T, src string, asOf []string) float64 {
	t.Helper()
	dir := t.TempDir()
	raw, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "state.db")
	if err := os.WriteFile(p, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := store.OpenBolt(p, store.BoltOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	at, err := explain.AsOf(st)
	if err != nil {
		t.Fatal(err)
	}
	if len(asOf) == 2 {
		if at, err = time.Parse(time.RFC3339, asOf[1]); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(dir, "m.prom")
	if err := metrics.Write(out, filepath.Join(dir, metrics.CountersFile), st, metrics.Tick{EndedAt: at, Interval: time.Minute}); err != nil {
		t.Fatal(err)
	}
	text, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^monky_deployd_needs_person\{[^}]*\} (\S+)$`).FindSubmatch(text)
	if m == nil {
		t.Fatalf("no monky_deployd_needs_person in\n%s", text)
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func supportGolden(t *testing.T, name, got string) {
	t.Helper()
	testkit.Golden(t, filepath.Join(supportDir, name), got, *updateSupport, "go test ./cmd/monky-deployd -run SupportCorpus -update")
}

// TestSinceOnACopyCountsFromItsNewestTick: --since on an old copy is measured back from the
// file's newest tick, and says so, instead of finding nothing because the copy is old.
func TestSinceOnACopyCountsFromItsNewestTick(t *testing.T) {
	src := filepath.Join(supportDir, "repeated-75.db")
	var out, errb bytes.Buffer
	if code := run([]string{"monky-deployd", "explain", "--state-file", src, "--since", "1m"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	for _, want := range []string{"ticks of the last 1m0s before the file's newest tick", "\ntick 5 ", "why: CHECKIN_FAILED"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("explain --since on a copy lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "tick 1 ") || strings.Contains(out.String(), "tick 2 ") || strings.Contains(out.String(), "no tick") {
		t.Errorf("--since kept a tick before the window, or found none:\n%s", out.String())
	}
}

// TestEarlyFailureLeavesATrace: a tick that fails before the machine moves (here: transport
// sdk in a build without the SDK; in a build with it, an identity whose certificate is not
// one) is still a tick in the journal, with its exit and code.
func TestEarlyFailureLeavesATrace(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "sdk.yaml")
	stateDir := filepath.Join(dir, "state")
	identity := filepath.Join(dir, "identity.json")
	testkit.WriteFile(t, identity, `{"ztAPI": "https://ctrl.ziti.example:1280", "id": {"cert": "pem:x", "key": "pem:x", "ca": "pem:x"}}`, 0o600)
	code, fix := "SDK_UNAVAILABLE", "transport: proxy"
	if config.SDKBuiltIn {
		code, fix = "TRANSPORT_IDENTITY", "monky-deployd enroll --force --jwt"
	}
	if err := os.WriteFile(cfg, []byte("env_id: env-qa-02\nsite: cbs\ntransport: sdk\nidentity: "+identity+
		"\nstate_dir: "+stateDir+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := run([]string{"monky-deployd", "--config", cfg, "run", "--once"}, &out, &errb); code != 1 {
		t.Fatalf("run --once: exit %d, want 1: %s", code, errb.String())
	}
	out.Reset()
	if code := run([]string{"monky-deployd", "explain", "--state-file", filepath.Join(stateDir, "state.db")}, &out, &errb); code != 0 {
		t.Fatalf("explain: exit %d: %s", code, errb.String())
	}
	for _, want := range []string{"exit 1", "tick-end", "why: " + code, fix} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("explain of the failed tick lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	// a config this build cannot run ends every tick the same way: it needs a person
	if code := run([]string{"monky-deployd", "status", "--json", "--state-file", filepath.Join(stateDir, "state.db")}, &out, &errb); code != 1 {
		t.Fatalf("status: exit %d, want 1: %s", code, errb.String())
	}
	var st struct {
		LastExit int    `json:"last_exit"`
		Verdict  string `json:"verdict"`
		Why      *struct{ Code string }
	}
	if err := json.Unmarshal(out.Bytes(), &st); err != nil || st.LastExit != 1 || st.Verdict != "needs_person" || st.Why == nil || st.Why.Code != code {
		t.Errorf("status --json: %s (%v)", out.String(), err)
	}
}
