package states_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/dotenv"

	"github.com/tikali/monky-deployd/internal/vocab"
	"github.com/tikali/monky-deployd/machine/explain"
)

// Issue 14's bypasses, each as an attacker who shapes a bundle (or tenancy's answer) would
// try it against the recording docker stub: before the fix every one of them was applied
// (Up, Reported) although compose would run a privileged or host-bound service.

// A clean compose.yaml beside a compose.override.yaml that adds privileged and another image:
// the stub loads the override as compose does when no -f is given. Pinned, nothing of it runs.
func TestBypassOverrideBesideIsNotApplied(t *testing.T) {
	h := newHarness(t)
	h.release("v1", func(f map[string][]byte) {
		f["compose.override.yaml"] = []byte("services:\n  api:\n    image: evil/api:latest\n    privileged: true\n")
	})
	h.wantExit(h.tick(), 0)
	raw, err := os.ReadFile(filepath.Join(h.dockerState, "projects", "monky-env-qa-02.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cs []struct {
		Service, Image string
		Privileged     bool
	}
	if err := json.Unmarshal(raw, &cs); err != nil || len(cs) != 2 {
		t.Fatalf("project state %s: %v", raw, err)
	}
	for _, c := range cs {
		if c.Privileged || strings.Contains(c.Image, "evil") {
			t.Errorf("service %s runs %s privileged=%t: compose.override.yaml was applied", c.Service, c.Image, c.Privileged)
		}
	}
}

// Bundles compose would run privileged or host-bound, refused before any lease.
func TestBypassesRefusedBeforeTheLease(t *testing.T) {
	priv := "services:\n  api:\n    image: x\n    privileged: true\n"
	cases := []struct {
		name   string
		code   vocab.Code
		detail string
		files  map[string]string
	}{
		{"COMPOSE_FILE in .env.template", vocab.BundleInvalid, "sets COMPOSE_FILE",
			map[string]string{".env.template": "COMPOSE_FILE=evil.yaml\nGEMINI_API_KEY=${GEMINI_API_KEY}\nDB_PASSWORD=${DB_PASSWORD}\n", "evil.yaml": priv}},
		{"include of another bundle file", vocab.PrivilegedRefused, "service api: privileged: true",
			map[string]string{"compose.yaml": "include: [more.yaml]\nservices:\n  web:\n    image: x\n", "more.yaml": priv}},
		{"extends file", vocab.PrivilegedRefused, "service web: privileged: true",
			map[string]string{"compose.yaml": "services:\n  web:\n    image: x\n    extends: {file: base.yaml, service: api}\n", "base.yaml": priv}},
		{"a second YAML document", vocab.BundleInvalid, "2 YAML documents",
			map[string]string{"compose.yaml": "services:\n  api:\n    image: x\n---\n" + priv}},
		{"privileged: ${P:-true}", vocab.PrivilegedRefused, "service api: privileged: true",
			map[string]string{"compose.yaml": "services:\n  api:\n    image: x\n    privileged: ${P:-true}\n"}},
		{"bind of ../../../..", vocab.PrivilegedRefused, "service api: bind <release>/../../../.. → /host",
			map[string]string{"compose.yaml": "services:\n  api:\n    image: x\n    volumes: [\"../../../..:/host\"]\n"}},
		{"bind of ${X:-/}", vocab.PrivilegedRefused, "service api: bind / → /host",
			map[string]string{"compose.yaml": "services:\n  api:\n    image: x\n    volumes: [\"${X:-/}:/host\"]\n"}},
		{"local volume whose driver_opts bind /", vocab.PrivilegedRefused, "service api: volume root binds / (driver_opts) → /host",
			map[string]string{"compose.yaml": "services:\n  api:\n    image: x\n    volumes: [\"root:/host\"]\nvolumes:\n  root:\n    driver_opts: {type: none, o: bind, device: /}\n"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			h.release("v1", func(f map[string][]byte) {
				for n, b := range c.files {
					f[n] = []byte(b)
				}
			})
			h.wantExit(h.tick(), 1)
			cnt := h.sim.Counts(env)
			if cnt.LeaseAsks != 0 || cnt.KVReads != 0 {
				t.Errorf("lease asks %d, kv reads %d: the refusal came after the lease", cnt.LeaseAsks, cnt.KVReads)
			}
			if calls := h.composeCalls(); len(calls) != 0 {
				t.Errorf("compose ran: %v", calls)
			}
			res, detail := h.lastReport()
			if res != "failed" || !strings.HasPrefix(detail, string(c.code)+": ") || !strings.Contains(detail, c.detail) {
				t.Errorf("report %s %q, want failed %s naming %q", res, detail, c.code, c.detail)
			}
		})
	}
}

// A bundle that ships its own .env is refused from the archive: no lease, no login with a
// lease's grant, no KV read (it used to fail only at staging, after all three).
func TestBypassBundleCarryingDotEnv(t *testing.T) {
	h := newHarness(t)
	h.release("v1", func(f map[string][]byte) { f[".env"] = []byte("COMPOSE_FILE=evil.yaml\n") })
	h.wantExit(h.tick(), 1)
	if cnt := h.sim.Counts(env); cnt.LeaseAsks != 0 || cnt.Logins != 1 || cnt.KVReads != 0 {
		t.Errorf("lease asks %d, logins %d, kv reads %d", cnt.LeaseAsks, cnt.Logins, cnt.KVReads)
	}
	if res, detail := h.lastReport(); res != "failed" || !strings.HasPrefix(detail, "BUNDLE_INVALID: the bundle carries .env") {
		t.Errorf("report %s %q", res, detail)
	}
}

// A secret that starts with a quote, first in a value followed by a comment, used to close
// its own quote and set COMPOSE_FILE on the same .env line. Compose's own reader must find
// the template's keys alone, each with exactly its value.
func TestBypassSecretCannotSetAVariable(t *testing.T) {
	h := newHarness(t)
	secret := `'x' COMPOSE_FILE=evil.yaml`
	h.sim.PutSecret(env, "db", map[string]string{"password": secret})
	sha := h.release("v1", func(f map[string][]byte) {
		f[".env.template"] = []byte("GEMINI_API_KEY=${GEMINI_API_KEY}\nDB_PASSWORD=${DB_PASSWORD} # the database\n")
		f["evil.yaml"] = []byte("services:\n  evil:\n    image: evil\n    privileged: true\n")
	})
	h.wantExit(h.tick(), 0)
	raw, err := os.ReadFile(filepath.Join(h.cfg.DeployDir, "releases", sha, ".env"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := dotenv.UnmarshalBytesWithLookup(raw, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got["DB_PASSWORD"] != secret || got["GEMINI_API_KEY"] != "canary-gemini-v1-Qx7" {
		t.Errorf("compose reads .env as %q", got)
	}
}

// withCheckinSha makes tenancy's check-in answer carry desired_sha = rewrite(the real one).
func withCheckinSha(h *harness, rewrite func(string) string) {
	inner := h.sim.TenancyHandler()
	h.ten.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/agent/checkin" {
			inner.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		inner.ServeHTTP(rec, r)
		var m map[string]any
		if json.Unmarshal(rec.Body.Bytes(), &m) == nil {
			if s, ok := m["desired_sha"].(string); ok && s != "" {
				m["desired_sha"] = rewrite(s)
				m["bundle_url"] = "/v1/agent/bundle/" + env + "/" + s // the real bundle, if it were fetched
			}
		}
		b, _ := json.Marshal(m)
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.Header().Del("Content-Length")
		w.WriteHeader(rec.Code)
		_, _ = io.Copy(w, bytes.NewReader(b))
	})
}

// Tenancy desiring an applied sha in upper case bypassed ROLLBACK_REFUSED (one comparison
// folded case, another did not). A sha is 64 lowercase hex characters: anything else is
// CHECKIN_SHAPE, exit 1, nothing fetched.
func TestBypassUppercaseShaIsCheckinShape(t *testing.T) {
	h := newHarness(t)
	v1 := h.apply("v1")
	h.apply("v2")
	if err := h.sim.SetDesired(env, v1); err != nil {
		t.Fatal(err)
	}
	withCheckinSha(h, strings.ToUpper)
	fetches := h.sim.Counts(env).BundleFetches
	h.wantExit(h.tick(), 1)
	if got := h.sim.Counts(env).BundleFetches; got != fetches {
		t.Errorf("the bundle of an upper-case sha was fetched (%d → %d)", fetches, got)
	}
	if rec := h.record(); rec.AppliedSha == v1 {
		t.Errorf("the rolled-back sha was applied")
	}
	if !strings.Contains(h.logs.String(), "CHECKIN_SHAPE") {
		t.Errorf("the tick does not say CHECKIN_SHAPE:\n%s", h.logs.String())
	}
}

// Control characters from tenancy (a desired sha holding ESC[2J) never reach a terminal raw:
// not through the log, not through explain.
func TestBypassControlCharactersFromTenancy(t *testing.T) {
	h := newHarness(t)
	h.release("v1", nil)
	withCheckinSha(h, func(s string) string { return "\x1b[2J" + s[4:] })
	h.wantExit(h.tick(), 1)
	d, err := explain.Build(h.st, explain.Options{Now: h.clock.Now()})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	explain.WriteText(&out, d)
	j, _ := json.Marshal(d)
	for name, s := range map[string]string{"log": h.logs.String(), "explain": out.String(), "explain --json": string(j)} {
		if strings.ContainsAny(s, "\x1b") || strings.Contains(s, `\u001b`) {
			t.Errorf("%s carries the escape sequence:\n%q", name, s)
		}
	}
	if !strings.Contains(out.String(), "CHECKIN_SHAPE") {
		t.Errorf("explain does not name CHECKIN_SHAPE:\n%s", out.String())
	}
}
