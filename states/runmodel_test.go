package states_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/internal/testkit"
	"github.com/tikali/monky-deployd/internal/vocab"
	"github.com/tikali/monky-deployd/store"
)

// Compose runs the model the agent checked (issue 29, classes 1 and 2).

// modelHanded is the content of the -f file of the last compose call holding sub (what
// compose was handed), and the call's docker environment names.
func (h *harness) modelHanded(sub string) (string, []string) {
	h.t.Helper()
	calls := testkit.DockerCalls(h.t, h.dockerLog)
	for i := len(calls) - 1; i >= 0; i-- {
		if calls[i].Has(sub) {
			for _, body := range calls[i].Files {
				return body, calls[i].Env
			}
			h.t.Fatalf("%s was handed no -f file: %q", sub, calls[i].Argv)
		}
	}
	h.t.Fatalf("no compose %s call", sub)
	return "", nil
}

// Variables docker, compose or the agent add at run time cannot change what runs: a bind
// `./${COMPOSE_INTERACTIVE_NO_CLI:+../../..}` was `./` when checked and `/` at `up`, and
// `${DOCKER_CONFIG:-./data}` handed a container the agent's docker directory. Compose is now
// handed the model that was checked, resolved without the process environment.
func TestComposeIsHandedTheCheckedModel(t *testing.T) {
	h := newHarness(t)
	t.Setenv("COMPOSE_INTERACTIVE_NO_CLI", "1")
	t.Setenv("DOCKER_CONFIG", "/root/.docker")
	sha := h.release("v1", func(f map[string][]byte) {
		f["compose.yaml"] = []byte(`services:
  api:
    image: harbor.example/monky/api:v1
    env_file: .env
    volumes:
      - ./${COMPOSE_INTERACTIVE_NO_CLI:+../../..}:/host:ro
      - ${DOCKER_CONFIG:-./data}:/d
    command: ["echo", "$${LITERAL}", "${RELEASE}"]
    healthcheck:
      test: ["CMD", "true"]
`)
	})
	h.wantExit(h.tick(), 0)
	rel := filepath.Join(h.cfg.DeployDir, "releases", sha)
	model, envNames := h.modelHanded("up")
	for _, want := range []string{"source: " + rel + "\n", "source: " + filepath.Join(rel, "data") + "\n",
		"- $${LITERAL}\n", "- v1\n", "DB_PASSWORD: canary-db-pw-Kw3"} {
		if !strings.Contains(model, want) {
			t.Errorf("the model compose was handed lacks %q:\n%s", want, model)
		}
	}
	for _, bad := range []string{"source: /\n", "${COMPOSE", "${DOCKER", h.cfg.DockerConfigDir() + "\n", "env_file"} {
		if strings.Contains(model, bad) {
			t.Errorf("the model compose was handed holds %q:\n%s", bad, model)
		}
	}
	if strings.Join(envNames, " ") == "" || len(envNames) != 4 {
		t.Errorf("docker's environment: %q, want the four names the agent sets", envNames)
	}
	fi, err := os.Stat(filepath.Join(h.cfg.DeployDir, "resolved", sha+".yaml"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("resolved model: %v", err)
	}
	// the release directory holds the bundle's files and .env alone: the support one-liner's
	// sha is still the release's
	if _, err := os.Stat(filepath.Join(rel, "resolved")); err == nil {
		t.Errorf("a resolved model inside the release")
	}
}

// cutUp starts what `up` starts, then reports the tick cut (a kill, a power loss after the
// containers started): the machine stays at Pulled and the next tick runs `up` again.
type cutUp struct {
	effects.Compose
	cut bool
}

func (c *cutUp) Up(ctx context.Context, dir string) error {
	if err := c.Compose.Up(ctx, dir); err != nil || c.cut {
		return err
	}
	c.cut = true
	return &effects.Error{Op: "compose up", Kind: effects.Temporary, Msg: "killed"}
}

// A service with the release mounted read-write rewrites compose.yaml (or plants a symlink)
// while `up` is cut; the tick that resumes at `up` ran the rewritten file unchecked. Now it
// finds the release changed, fails with RELEASE_CHANGED naming what changed and runs nothing.
func TestResumedUpNeverRunsAChangedRelease(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		change     func(rel string) error
	}{
		{"compose.yaml rewritten", "hash to", func(rel string) error {
			return os.WriteFile(filepath.Join(rel, "compose.yaml"), []byte("services:\n  api:\n    image: evil\n    privileged: true\n"), 0o644)
		}},
		{"symlink planted", "config/host is a symlink (→ /)", func(rel string) error {
			return os.Symlink("/", filepath.Join(rel, "config", "host"))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			sha := h.release("v1", nil)
			a := h.agent()
			a.Fx.Compose = &cutUp{Compose: a.Fx.Compose}
			h.wantExit(a.Tick(context.Background()).Exit, 75)
			if rec := h.record(); rec.State != "Pulled" {
				t.Fatalf("state %s after the cut up, want Pulled", rec.State)
			}
			rel := filepath.Join(h.cfg.DeployDir, "releases", sha)
			if err := tc.change(rel); err != nil {
				t.Fatal(err)
			}
			ups := testkit.CountDockerCalls(t, h.dockerLog, "up")
			h.wantExit(h.tick(), 1)
			if n := testkit.CountDockerCalls(t, h.dockerLog, "up"); n != ups {
				t.Errorf("compose up ran on the changed release")
			}
			rec := h.record()
			if rec.Failure == nil || rec.Failure.Code != "RELEASE_CHANGED" || !strings.Contains(rec.Failure.Detail, tc.want) {
				t.Fatalf("failure %+v, want RELEASE_CHANGED naming %q", rec.Failure, tc.want)
			}
			raw, _ := os.ReadFile(filepath.Join(h.dockerState, "projects", "monky-env-qa-02.json"))
			var cs []struct{ Image string }
			_ = json.Unmarshal(raw, &cs)
			for _, c := range cs {
				if c.Image == "evil" {
					t.Errorf("the rewritten compose file ran: %s", raw)
				}
			}
		})
	}
}

// A container of a converged box plants a symlink in its release: the heartbeat's `compose ps`
// is refused with RELEASE_CHANGED and runs nothing. The heartbeat reported that as UNHEALTHY,
// no containers running, while they ran: its report, journal, explain and exit name
// RELEASE_CHANGED now, and compose logs is not run on the changed release either.
func TestHeartbeatOnAChangedReleaseNamesRELEASE_CHANGED(t *testing.T) {
	h := newHarness(t)
	sha := h.apply("v1")
	h.wantExit(h.tick(), 0) // a heartbeat
	if err := os.Symlink("/", filepath.Join(h.cfg.DeployDir, "releases", sha, "config", "host")); err != nil {
		t.Fatal(err)
	}
	logs := testkit.CountDockerCalls(t, h.dockerLog, "logs")
	res := h.agent().Tick(context.Background())
	h.wantExit(res.Exit, 1)
	if effects.CodeOf(res.Err) != vocab.ReleaseChanged {
		t.Errorf("the tick's error %v, want RELEASE_CHANGED", res.Err)
	}
	result, detail := h.lastReport()
	if result != effects.ResultFailed || !strings.HasPrefix(detail, "RELEASE_CHANGED: ") ||
		!strings.Contains(detail, "config/host is a symlink (→ /)") || strings.Contains(detail, "no containers") {
		t.Errorf("report %s %q, want failed RELEASE_CHANGED naming config/host", result, detail)
	}
	h.wantReportWhy(effects.VerdictNeedsPerson)
	if w := h.explainWhy(); w.Code != vocab.ReleaseChanged || !strings.Contains(w.Evidence, "config/host") {
		t.Errorf("explain's why %+v, want RELEASE_CHANGED naming config/host", w)
	}
	es := journal(t, h.st)
	var last store.Entry
	for _, e := range es {
		if e.To == "Failed" && e.From != e.To {
			last = e
		}
	}
	if last.Code != vocab.ReleaseChanged {
		t.Errorf("the heartbeat's failure is journaled as %+v, want RELEASE_CHANGED", last)
	}
	if n := testkit.CountDockerCalls(t, h.dockerLog, "logs"); n != logs {
		t.Errorf("compose logs ran on the changed release")
	}
	// what explain says clears it is what does: no apply follows a heartbeat to stage the
	// release again, resume has nothing parked to clear, restoring the release clears it
	w := h.explainWhy()
	if !strings.Contains(h.ownConfig(w.Next), "restoring the release's files or a new desired sha clears it, `sudo -u monky-deployd monky-deployd resume` does not") ||
		!strings.Contains(w.Fix, "a heartbeat's clears when the release is restored or a new sha is desired (resume does not clear it)") ||
		strings.Contains(w.Fix, "the next apply stages it again") || strings.Contains(w.Evidence, "the next apply stages it again") {
		t.Errorf("explain's why %+v does not say what clears a heartbeat's RELEASE_CHANGED", w)
	}
	h.clock.Advance(time.Minute)
	if cleared, err := h.agent().Resume(false); err != nil || len(cleared) != 0 {
		t.Fatalf("resume cleared %v (%v), want nothing: a heartbeat's failure parks nothing", cleared, err)
	}
	if res := h.agent().Tick(context.Background()); effects.CodeOf(res.Err) != vocab.ReleaseChanged {
		t.Errorf("the tick after resume: %v, want RELEASE_CHANGED still", res.Err)
	}
	h.clock.Advance(time.Minute)
	if err := os.Remove(filepath.Join(h.cfg.DeployDir, "releases", sha, "config", "host")); err != nil {
		t.Fatal(err)
	}
	h.wantExit(h.tick(), 0)
	if result, detail := h.lastReport(); result != effects.ResultApplied {
		t.Errorf("report %s %q once the release is restored, want applied", result, detail)
	}
}

// A heartbeat whose `compose ps` fails does not know what runs: it reported UNHEALTHY "no
// containers … are running", which was false. The code stays UNHEALTHY; the detail says ps
// failed, with its error. When ps answers with no container, every service of the model is named.
func TestHeartbeatWhosePsFailsSaysSo(t *testing.T) {
	h := newHarness(t)
	h.apply("v1")
	h.dockerKnob("ps-error", "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?\n")
	h.wantExit(h.tick(), 1)
	result, detail := h.lastReport()
	want := "UNHEALTHY: compose ps failed: COMPOSE_PS_FAILED: Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?"
	if result != effects.ResultFailed || detail != want {
		t.Errorf("report %s %q, want failed %q", result, detail, want)
	}
	if w := h.explainWhy(); w.Code != vocab.Unhealthy || !strings.Contains(w.Evidence, "compose ps failed: ") ||
		!strings.Contains(w.Fault, "could not look at the containers") || strings.Contains(w.Fault, "no longer runs what it applied") {
		t.Errorf("explain's why %+v, want UNHEALTHY naming the failed ps, not a service down", w)
	}
	// ps answers, with nothing running (and no heal): every service of the model is named
	h.appendConfig("heal: false\n")
	h.dockerKnob("ps-error", "")
	h.dockerKnob("projects/"+h.cfg.ComposeProject+".json", "[]")
	h.wantExit(h.tick(), 1)
	if result, detail := h.lastReport(); result != effects.ResultFailed || detail != "UNHEALTHY: api (no container), worker (no container)" {
		t.Errorf("report %s %q, want failed UNHEALTHY: api (no container), worker (no container)", result, detail)
	}
}

// A service of a profile compose is not asked for does not run: it is checked (with every
// network and volume it names) but not handed to compose, nor what only it uses.
func TestProfileServiceCheckedButNotRun(t *testing.T) {
	h := newHarness(t)
	h.release("v1", func(f map[string][]byte) {
		f["compose.yaml"] = []byte(`services:
  api:
    image: harbor.example/monky/api:v1
    healthcheck:
      test: ["CMD", "true"]
  debug:
    image: harbor.example/monky/debug:v1
    profiles: [debug]
    volumes: [scratch:/scratch]
volumes:
  scratch: {}
`)
	})
	h.wantExit(h.tick(), 0)
	model, _ := h.modelHanded("up")
	if strings.Contains(model, "debug") || strings.Contains(model, "scratch") {
		t.Errorf("compose was handed what no service it runs uses:\n%s", model)
	}
	if !strings.Contains(model, "api:v1") {
		t.Errorf("the model lacks api:\n%s", model)
	}
}

// A value only a secret decides, in a way the check before the lease cannot see: there the
// secret stands as a placeholder, any non-empty value, and `${RELEASE_RO:+:ro}` is `:ro` — a
// read-only bind of the release. The secret is empty, so the model compose would run binds
// the release read-write. Only the authoritative check, on the model loaded with the
// secrets' values, refuses it: after the lease, before any compose call but ps, with the
// release written but never made current and no model left for compose to run.
func TestRefusedOnlyOnTheModelWithTheSecretsValues(t *testing.T) {
	h := newHarness(t)
	h.sim.PutSecret(env, "mount", map[string]string{"ro": ""})
	sha := h.release("v1", func(f map[string][]byte) {
		f["compose.yaml"] = []byte(`services:
  api:
    image: harbor.example/monky/api:v1
    env_file: .env
    volumes:
      - ./:/release${RELEASE_RO:+:ro}
    healthcheck:
      test: ["CMD", "true"]
`)
		f[".env.template"] = append(f[".env.template"], "RELEASE_RO=${RELEASE_RO}\n"...)
		f["secrets.manifest.json"] = []byte(`{"entries": [
  {"var": "GEMINI_API_KEY", "path": "monky/data/env-qa-02/see/gemini", "key": "value", "version": 1},
  {"var": "DB_PASSWORD", "path": "monky/data/env-qa-02/see/db", "key": "password"},
  {"var": "RELEASE_RO", "path": "monky/data/env-qa-02/see/mount", "key": "ro"}
]}`)
	})
	h.wantExit(h.tick(), 1)

	const want = "service api: writable bind of the release directory → /release (mount it :ro) (in the model compose would run"
	rec := h.record()
	if rec.State != "Failed" || rec.Failure == nil || rec.Failure.Code != "PRIVILEGED_REFUSED" || !strings.Contains(rec.Failure.Detail, want) {
		t.Fatalf("state %s failure %+v, want Failed PRIVILEGED_REFUSED naming %q", rec.State, rec.Failure, want)
	}
	if res, detail := h.lastReport(); res != "failed" || !strings.HasPrefix(detail, "PRIVILEGED_REFUSED: ") || !strings.Contains(detail, want) {
		t.Errorf("report %s %q, want failed PRIVILEGED_REFUSED", res, detail)
	}
	// the check before the lease passed it: the lease was taken and the secrets read
	c := h.sim.Counts(env)
	if c.Leases != 1 || c.KVReads != 3 {
		t.Errorf("leases %d, kv reads %d: want the one lease and the three reads the refusal came after", c.Leases, c.KVReads)
	}
	e, ok := h.entry(func(e store.Entry) bool { return e.Code == "PRIVILEGED_REFUSED" })
	if !ok || e.From != "LoggedIn" || e.To != "Failed" || !strings.Contains(e.Detail, want) {
		t.Errorf("journal: %+v (found %t), want LoggedIn → Failed PRIVILEGED_REFUSED", e, ok)
	}
	if calls := h.composeCalls(); len(calls) != 0 {
		t.Errorf("compose calls after the refusal: %v", calls)
	}
	if n := testkit.CountDockerCalls(t, h.dockerLog, "up"); n != 0 {
		t.Errorf("compose up ran %d time(s)", n)
	}
	h.wantGone(filepath.Join(h.cfg.DeployDir, "resolved", sha+".yaml"), "a model of the refused release was written")
	h.wantGone(filepath.Join(h.cfg.DeployDir, "current"), "current points at the refused release")

	// the refusal is final: the next tick neither leases again nor reads a secret
	h.wantExit(h.tick(), 1)
	if c2 := h.sim.Counts(env); c2.Leases != 1 || c2.LeaseAsks != c.LeaseAsks || c2.KVReads != c.KVReads {
		t.Errorf("the next tick: leases %d, asks %d, kv reads %d; want %d, %d, %d", c2.Leases, c2.LeaseAsks, c2.KVReads, c.Leases, c.LeaseAsks, c.KVReads)
	}
}
