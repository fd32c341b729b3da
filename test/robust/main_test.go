package robust

// The shared harness: TestMain builds the binaries once; a box is one simulated install (a
// running monky-sim with its own releases, kit and state_dir). Every output of every run is
// kept for the secret scan.

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tikali/monky-deployd/internal/testkit"
)

const envID = "env-demo-01"

var (
	releasesDir string // v1, v2, v3 (v2 that fails and consents to a revert) and secrets.json with unique canaries
	canaries    map[string]string
)

// TestMain builds the agent as the package ships it (`make agent`; its failpoints are inert
// unless MONKY_DEPLOYD_FAILPOINT names one) and what a box runs beside it, and writes the
// releases the boxes serve.
func TestMain(m *testing.M) {
	os.Exit(testkit.Run(m, func() error {
		if err := testkit.BuildBox(); err != nil {
			return err
		}
		if _, err := testkit.BuildAgent(""); err != nil {
			return err
		}
		releasesDir = filepath.Join(testkit.BinDir(), "releases")
		return writeReleases(releasesDir)
	}))
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// writeReleases copies the demo releases and adds a registry credential entry to each
// manifest, so a tick writes the docker config too; every secret value is a unique canary.
func writeReleases(dst string) error {
	canaries = map[string]string{
		"gemini v2 secret": "CANARY-gemini-" + randHex(8),
		"db secret":        "CANARY-db-" + randHex(8),
		"registry secret":  "CANARY-registry-" + randHex(8),
	}
	// v3 is v2 with a service that exits (which nothing restarts) and a bundle that consents to
	// a revert (agent.revert_on_failure): its apply fails and brings v1 back
	for _, rel := range []string{"v1", "v2", "v3"} {
		src := rel
		if rel == "v3" {
			src = "v2"
		}
		err := testkit.CopyTree(filepath.Join(dst, rel), filepath.Join(testkit.Root(), "testdata", "demo", src), func(name string, raw []byte) ([]byte, error) {
			switch {
			case rel == "v3" && name == "compose.yaml":
				return bytes.Replace(raw, []byte("\nvolumes:\n"), []byte("  canary:\n    image: monky-demo/worker:2\n    restart: \"no\"\n\nvolumes:\n"), 1), nil
			case rel == "v3" && name == "bundle.json":
				return []byte(`{"agent": {"revert_on_failure": true}, "disk_need_bytes": 104857600}`), nil
			}
			if filepath.Base(name) != "secrets.manifest.json" {
				return raw, nil
			}
			var doc struct {
				Entries []map[string]any `json:"entries"`
			}
			if err := json.Unmarshal(raw, &doc); err != nil {
				return nil, err
			}
			doc.Entries = append(doc.Entries, map[string]any{"use": "registry-auth", "path": "monky/data/" + envID + "/see/registry", "key": "value"})
			return json.Marshal(doc)
		})
		if err != nil {
			return fmt.Errorf("copy %s: %w", rel, err)
		}
	}
	reg, _ := json.Marshal(map[string]string{"registry": "registry.example.test", "username": "deploy", "password": canaries["registry secret"]})
	secrets := map[string]any{
		"gemini":   []map[string]string{{"value": "CANARY-gemini1-" + randHex(8)}, {"value": canaries["gemini v2 secret"]}, {"value": "CANARY-gemini3-" + randHex(8)}},
		"db":       map[string]string{"password": canaries["db secret"]},
		"registry": map[string]string{"value": string(reg)},
	}
	raw, _ := json.Marshal(secrets)
	return os.WriteFile(filepath.Join(dst, "secrets.json"), raw, 0o644)
}

// box is one simulated install (testkit.Box).
type box struct{ *testkit.Box }

func startBox(t testing.TB) *box { t.Helper(); return startBoxWith(t, releasesDir) }

// startBoxWith starts a box whose simulator serves the releases under rels.
func startBoxWith(t testing.TB, rels string) *box {
	t.Helper()
	return &box{testkit.StartBox(t, testkit.BoxOptions{Env: envID, Releases: rels})}
}

// agent runs the agent (no failpoint set unless env names some).
func (b *box) agent(env []string, args ...string) testkit.Result {
	b.T.Helper()
	return b.Run("monky-deployd", env, append([]string{"--config", b.Config()}, args...)...)
}

func (b *box) tick(env ...string) testkit.Result { b.T.Helper(); return b.agent(env, "run", "--once") }

type statusDoc struct {
	State      string `json:"state"`
	Next       string `json:"next"`
	AppliedSha string `json:"applied_sha"`
	DesiredSha string `json:"desired_sha"`
	Outbox     int    `json:"outbox"`
	LastExit   int    `json:"last_exit"`
}

func (b *box) status() statusDoc {
	b.T.Helper()
	r := b.agent(nil, "status", "--json")
	if r.Code != 0 && r.Code != 1 { // 1: the verdict is needs_person (a parked revert)
		b.T.Fatalf("status --json: exit %d: %s", r.Code, r.Stderr)
	}
	var d statusDoc
	if err := json.Unmarshal([]byte(r.Stdout), &d); err != nil {
		b.T.Fatalf("status --json: %v\n%s", err, r.Stdout)
	}
	// a fix line carries the box's own --config: the same words on every box
	d.Next = strings.ReplaceAll(d.Next, b.Config(), "<config>")
	return d
}
