package explain_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tikali/monky-deployd/internal/testkit"
	"github.com/tikali/monky-deployd/machine/explain"
	"github.com/tikali/monky-deployd/store"
)

var update = flag.Bool("update", false, "rewrite testdata/explain/*.txt from the traces, and docs/OPERATIONS.md's codes table")

// trace is a recorded history loaded: the store read from its export, explain's document of
// it, the export's bytes, and the export's time, which the tests use as "now" so the output is
// stable.
type trace struct {
	doc *explain.Doc
	st  store.Store
	raw []byte
	now time.Time
}

// loadTrace reads testdata/traces/<name>.ndjson into a store and explains it.
func loadTrace(t *testing.T, name string) trace {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "testdata", "traces", name+".ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	var hdr struct {
		ExportedAt time.Time `json:"exported_at"`
	}
	first, _, _ := bytes.Cut(raw, []byte("\n"))
	if err := json.Unmarshal(first, &hdr); err != nil || hdr.ExportedAt.IsZero() {
		t.Fatalf("%s: no header with exported_at: %v", name, err)
	}
	st, err := explain.ReadNDJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	d, err := explain.Build(st, explain.Options{N: 20, Now: hdr.ExportedAt})
	if err != nil {
		t.Fatal(err)
	}
	return trace{doc: &d, st: st, raw: raw, now: hdr.ExportedAt}
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	testkit.Golden(t, filepath.Join("..", "..", "testdata", "explain", name+".txt"), got, *update, "go test ./machine/explain -update")
}

// traces are real histories recorded by testdata/traces/record.sh.
var traces = []string{"full-apply", "rollback-refused", "privileged-refused", "pull-failed", "unhealthy",
	"disk-insufficient", "unauthenticated-blocked", "connection-refused",
	"bundle-invalid", "env-incomplete", "manifest-path-refused", "agent-env-mismatch",
	"lease-rate-limited", "lease-budget", "compose-up-failed", "superseded", "retired",
	"bundle-sha-mismatch", "bundle-env-mismatch", "lease-shape", "failed-parked"}

func TestExplainGoldenFromTraces(t *testing.T) {
	for _, name := range traces {
		t.Run(name, func(t *testing.T) {
			d := loadTrace(t, name).doc
			var b bytes.Buffer
			explain.WriteText(&b, *d)
			golden(t, name, b.String())
		})
	}
}

// TestWhyNamesTheFault checks the decisions the traces carry, not only their wording.
func TestWhyNamesTheFault(t *testing.T) {
	cases := []struct {
		trace, state, code string
		evidence, next     []string
	}{
		{"full-apply", "Reported", "", nil, nil},
		{"rollback-refused", "Refused", "ROLLBACK_REFUSED", []string{"was applied on this box before"}, []string{"not fetched again", "resume"}},
		{"privileged-refused", "Refused", "PRIVILEGED_REFUSED", []string{"service api", "privileged: true"}, []string{"resume"}},
		{"pull-failed", "Failed", "COMPOSE_PULL_FAILED", []string{"no basic auth credentials"}, []string{"retry 2 of 5 at "}},
		{"unhealthy", "Failed", "UNHEALTHY", []string{"api (running/unhealthy)"}, []string{"retry 2 of 5"}},
		{"disk-insufficient", "Refused", "DISK_INSUFFICIENT", []string{"MiB free", "bundle needs", "docker-state"}, []string{"Measured again at every tick"}},
		{"unauthenticated-blocked", "Blocked", "AGENT_UNAUTHENTICATED", []string{"bearer refused"}, []string{"bootstrap.jwt"}},
		{"connection-refused", "Reported", "CONNECTION_REFUSED", []string{"nothing listens at 127.0.0.1:"}, []string{"tries again"}},
		{"bundle-invalid", "Refused", "BUNDLE_INVALID", []string{"compose.yaml is not parsable YAML"}, []string{"stays refused", "resume"}},
		{"bundle-sha-mismatch", "Refused", "BUNDLE_SHA_MISMATCH", []string{"content sha ", "≠ desired "}, []string{"stays refused"}},
		{"bundle-env-mismatch", "Refused", "BUNDLE_ENV_MISMATCH", []string{"bundle is for env-prod-07, this agent is env-demo-01"}, []string{"stays refused"}},
		{"env-incomplete", "Refused", "ENV_INCOMPLETE", []string{"SENTRY_DSN"}, []string{"stays refused"}},
		{"manifest-path-refused", "Refused", "MANIFEST_PATH_REFUSED", []string{"DB_PASSWORD", "env-prod-07"}, []string{"stays refused"}},
		{"agent-env-mismatch", "Blocked", "AGENT_ENV_MISMATCH", []string{"pinned to env-demo-01, not env-demo-02"}, []string{"exits 78", "config.yaml changes"}},
		{"lease-rate-limited", "BundleVerified", "LEASE_RATE_LIMITED", []string{"no lease before "}, []string{"Retry-After"}},
		{"lease-budget", "BundleVerified", "LEASE_BUDGET", []string{"5/5"}, []string{"frees a slot at "}},
		{"lease-shape", "Failed", "LEASE_SHAPE", []string{"AppRole"}, []string{"retry 2 of 5"}},
		{"compose-up-failed", "Failed", "COMPOSE_UP_FAILED", []string{"port is already allocated"}, []string{"retry 2 of 5"}},
		{"superseded", "Reported", "", nil, nil},
		{"retired", "Reported", "", nil, nil},
	}
	for _, c := range cases {
		t.Run(c.trace, func(t *testing.T) {
			d := loadTrace(t, c.trace).doc
			if d.State != c.state {
				t.Errorf("state %q, want %q", d.State, c.state)
			}
			if c.code == "" {
				if d.Why != nil {
					t.Errorf("converged box has a why: %+v", *d.Why)
				}
				return
			}
			if d.Why == nil {
				t.Fatalf("no why; want %s", c.code)
			}
			w := *d.Why
			if string(w.Code) != c.code || w.Fault == "" || w.Fix == "" || w.Tick == 0 || w.At.IsZero() {
				t.Errorf("why %+v: want code %s with fault, fix, tick and time", w, c.code)
			}
			for _, s := range c.evidence {
				if !strings.Contains(w.Evidence, s) {
					t.Errorf("evidence %q lacks %q", w.Evidence, s)
				}
			}
			for _, s := range c.next {
				if !strings.Contains(w.Next, s) {
					t.Errorf("next %q lacks %q", w.Next, s)
				}
			}
		})
	}
}

// TestNDJSONRoundTrip exports each loaded trace again and reads it back: the same bytes, and
// the same explain document.
func TestNDJSONRoundTrip(t *testing.T) {
	for _, name := range traces {
		t.Run(name, func(t *testing.T) {
			tr := loadTrace(t, name)
			d1, raw, now := tr.doc, tr.raw, tr.now
			var out bytes.Buffer
			if err := explain.WriteNDJSON(&out, tr.st, now); err != nil {
				t.Fatal(err)
			}
			exported := out.String()
			if exported != string(raw) && *update {
				// the export's own shape changed (its header): the trace is exported again
				if err := os.WriteFile(filepath.Join("..", "..", "testdata", "traces", name+".ndjson"), out.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				raw = []byte(exported)
			}
			if exported != string(raw) {
				t.Errorf("re-export differs from the trace:\n%s", out.String())
			}
			st2, err := explain.ReadNDJSON(&out)
			if err != nil {
				t.Fatal(err)
			}
			d2, err := explain.Build(st2, explain.Options{Now: now})
			if err != nil {
				t.Fatal(err)
			}
			j1, _ := json.Marshal(d1)
			j2, _ := json.Marshal(d2)
			if !bytes.Equal(j1, j2) {
				t.Errorf("explain after a round trip differs:\n%s\n%s", j1, j2)
			}
			for i, line := range strings.Split(strings.TrimSpace(exported), "\n") {
				var m map[string]any
				if err := json.Unmarshal([]byte(line), &m); err != nil || m["type"] == nil {
					t.Errorf("line %d is not one typed JSON object: %v", i+1, err)
				}
			}
		})
	}
}

func TestReadNDJSONRejects(t *testing.T) {
	for name, in := range map[string]string{
		"unknown type": `{"type":"header","schema":1}` + "\n" + `{"type":"bogus"}`,
		"other schema": `{"type":"header","schema":9}`,
		"empty entry":  `{"type":"entry"}`,
		"not json":     `{"type":`,
	} {
		if _, err := explain.ReadNDJSON(strings.NewReader(in)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestHistoryShowsSupersedeAndRetire checks the two converged traces carry the step that made
// them: the superseded flight and the compose down of a retire.
func TestHistoryShowsSupersedeAndRetire(t *testing.T) {
	for trace, want := range map[string]string{
		"superseded": "BundleVerified → CheckedIn",
		"retired":    "CheckedIn → Down",
	} {
		d := loadTrace(t, trace).doc
		var b bytes.Buffer
		explain.WriteText(&b, *d)
		if !strings.Contains(b.String(), want) {
			t.Errorf("%s: explain lacks %q:\n%s", trace, want, b.String())
		}
	}
}
