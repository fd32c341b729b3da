package states_test

import (
	"archive/tar"
	"strings"
	"testing"

	"github.com/tikali/monky-deployd/internal/bundle"
	"github.com/tikali/monky-deployd/internal/testkit"
	"github.com/tikali/monky-deployd/internal/vocab"
	"github.com/tikali/monky-deployd/machine/explain"
	"github.com/tikali/monky-deployd/store"
)

func shaOf(files map[string]string) string {
	m := map[string][]byte{}
	for k, v := range files {
		m[k] = []byte(v)
	}
	return bundle.Sha(m)
}

// Every refusal before the lease: no lease, no login beyond the bootstrap, no compose call
// but ps, a failed report carrying the code — and the same sha is not fetched again.
func TestRefusalsCostNoLease(t *testing.T) {
	compose := "services:\n  api:\n    image: x\n"
	cases := []struct {
		code  vocab.Code
		setup func(h *harness)
	}{
		{vocab.BundleInvalid, func(h *harness) {
			files := testkit.Bundle(env, map[string]string{"compose.yaml": compose})
			arch := testkit.Tar(t, append(testkit.TarFiles(files), testkit.TarEntry{Header: tar.Header{Name: "evil", Linkname: "/etc/passwd", Typeflag: tar.TypeSymlink}})...)
			h.sim.AddRawRelease(env, "bad", "aa"+shaOf(files)[2:], arch)
			h.sim.SetDesired(env, "aa"+shaOf(files)[2:])
		}},
		{vocab.BundleShaMismatch, func(h *harness) {
			files := testkit.Bundle(env, map[string]string{"compose.yaml": compose})
			sha := strings.Repeat("ab", 32)
			h.sim.AddRawRelease(env, "bad", sha, testkit.Tar(t, testkit.TarFiles(files)...))
			h.sim.SetDesired(env, sha)
		}},
		{vocab.BundleEnvMismatch, func(h *harness) {
			files := testkit.Bundle("env-qa-03", map[string]string{"compose.yaml": compose})
			h.sim.AddRawRelease(env, "bad", shaOf(files), testkit.Tar(t, testkit.TarFiles(files)...))
			h.sim.SetDesired(env, shaOf(files))
		}},
		{vocab.EnvIncomplete, func(h *harness) {
			h.release("v1", func(f map[string][]byte) { f[".env.template"] = append(f[".env.template"], "X=${UNSUPPLIED}\n"...) })
		}},
		{vocab.ManifestPathRefused, func(h *harness) {
			h.release("v1", func(f map[string][]byte) {
				f["secrets.manifest.json"] = []byte(`{"entries": [
  {"var": "GEMINI_API_KEY", "path": "monky/data/env-prod-01/see/gemini"},
  {"var": "DB_PASSWORD", "path": "monky/data/env-qa-02/see/db", "key": "password"}]}`)
			})
		}},
		{vocab.PrivilegedRefused, func(h *harness) {
			h.release("v1", func(f map[string][]byte) {
				f["compose.yaml"] = []byte("services:\n  api:\n    image: x\n    volumes:\n      - type: bind\n        source: /var/run/docker.sock\n        target: /var/run/docker.sock\n")
			})
		}},
		{vocab.DiskInsufficient, func(h *harness) {
			h.disk.free = 100 << 20
			h.release("v1", nil)
		}},
	}
	for _, c := range cases {
		t.Run(string(c.code), func(t *testing.T) {
			h := newHarness(t)
			c.setup(h)
			h.wantExit(h.tick(), 1)
			cnt := h.sim.Counts(env)
			if cnt.LeaseAsks != 0 || cnt.Logins != 1 || cnt.KVReads != 0 {
				t.Errorf("lease asks %d, logins %d (1 is the bootstrap), kv reads %d", cnt.LeaseAsks, cnt.Logins, cnt.KVReads)
			}
			if calls := h.composeCalls(); len(calls) != 0 {
				t.Errorf("compose calls on a refused bundle: %v", calls)
			}
			res, detail := h.lastReport()
			if res != "failed" || !strings.HasPrefix(detail, string(c.code)+": ") {
				t.Errorf("report %s %q, want failed %s", res, detail, c.code)
			}
			if rec := h.record(); rec.State != "Refused" || rec.Refusal == nil || rec.Refusal.Code != c.code {
				t.Errorf("state %s refusal %+v", rec.State, rec.Refusal)
			}
			fetches := cnt.BundleFetches
			h.wantExit(h.tick(), 1)
			if got := h.sim.Counts(env).BundleFetches; got != fetches {
				t.Errorf("the refused sha was fetched again (%d → %d)", fetches, got)
			}
			if c.code == vocab.DiskInsufficient {
				_, detail := h.lastReport()
				if !strings.Contains(detail, " bytes) free") || !strings.Contains(detail, "declares no size") {
					t.Errorf("disk detail %q", detail)
				}
				h.disk.free = 500 << 30
				h.wantExit(h.tick(), 0)
				if res, _ := h.lastReport(); res != "applied" {
					t.Errorf("after the space freed: report %s", res)
				}
			}
		})
	}
}

func TestRollbackRefusedUnlessAllowed(t *testing.T) {
	h := newHarness(t)
	v1 := h.apply("v1")
	h.apply("v2")
	h.sim.SetDesired(env, v1)
	h.wantExit(h.tick(), 1)
	if res, detail := h.lastReport(); res != "failed" || !strings.HasPrefix(detail, "ROLLBACK_REFUSED") {
		t.Fatalf("report %s %q", res, detail)
	}
	h.release("v1-again", func(f map[string][]byte) {
		f["bundle.json"] = []byte(`{"agent": {"allow_rollback": true}}`)
		f["config/app.toml"] = []byte("name = \"v1\"\n")
		f["compose.yaml"] = backend("v1")["compose.yaml"]
	})
	h.wantExit(h.tick(), 0)
	if c := h.sim.Counts(env); c.Leases != 1 {
		t.Errorf("leases %d", c.Leases)
	}
}

func TestResumeRechecksARefusal(t *testing.T) {
	h := newHarness(t)
	h.release("v1", func(f map[string][]byte) { f[".env.template"] = append(f[".env.template"], "X=${UNSUPPLIED}\n"...) })
	h.wantExit(h.tick(), 1)
	cleared, err := h.agent().Resume(false)
	if err != nil || len(cleared) != 1 || !strings.Contains(cleared[0], "ENV_INCOMPLETE") {
		t.Fatalf("resume: %v %v", cleared, err)
	}
	fetches := h.sim.Counts(env).BundleFetches
	h.wantExit(h.tick(), 1)
	if h.sim.Counts(env).BundleFetches != fetches+1 {
		t.Errorf("resume did not make the next tick check again")
	}
}

func TestRetire(t *testing.T) {
	for _, c := range []struct {
		name   string
		prodOK bool
		want   string
	}{{"purge", false, "down -v"}, {"prod keeps volumes", true, "down --remove-orphans"}} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			if c.prodOK {
				h.appendConfig("prod: true\n")
			}
			h.apply("v1")
			h.sim.Retire(env, true)
			h.wantExit(h.tick(), 0)
			calls := strings.Join(h.composeCalls(), "\n")
			down := ""
			for _, l := range strings.Split(calls, "\n") {
				if strings.Contains(l, " down") {
					down = l
				}
			}
			if c.prodOK && strings.Contains(down, "-v") || !c.prodOK && !strings.Contains(down, "-v") {
				t.Errorf("down call %q", down)
			}
			if res, _ := h.lastReport(); res != "down" {
				t.Errorf("report %q", res)
			}
			if rec := h.record(); rec.State != "Reported" || rec.AppliedSha != "" {
				t.Errorf("state %s applied %q", rec.State, rec.AppliedSha)
			}
		})
	}
}

func TestAnEnvRecreatedAfterARetireMayRunItsLastShaAgain(t *testing.T) {
	h := newHarness(t)
	v1 := h.apply("v1")
	h.sim.Retire(env, false)
	h.wantExit(h.tick(), 0)
	// re-creating a retired env takes a new kit: the retire superseded the old grant
	grant, _ := h.sim.RevealKit(env)
	h.putGrant(grant)
	if err := h.sim.SetDesired(env, v1); err != nil {
		t.Fatal(err)
	}
	h.wantExit(h.tick(), 0)
	if res, detail := h.lastReport(); res != "applied" {
		t.Errorf("report %s %q: a retire starts the env afresh, no rollback", res, detail)
	}
}

// A box that cannot run compose (no docker CLI, or compose v1 alone) says so before any lease:
// DOCKER_NOT_FOUND, no lease asked, no secret read, checked again every tick, and the apply goes
// on by itself once compose v2 is there.
func TestNoComposeCostsNoLease(t *testing.T) {
	cases := []struct {
		name, knob, detail string
	}{
		{"no compose plugin", "error: docker: 'compose' is not a docker command.", "has no compose v2 plugin"},
		{"compose v1", "docker-compose version 1.29.2, build unknown\n", "compose v2 or later is needed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			h.dockerKnob("compose-version", c.knob)
			h.release("v1", nil)
			h.wantExit(h.tick(), 1)
			h.wantExit(h.tick(), 1)
			cnt := h.sim.Counts(env)
			if cnt.LeaseAsks != 0 || cnt.Leases != 0 || cnt.KVReads != 0 {
				t.Errorf("lease asks %d, leases %d, kv reads %d: want none before compose can run", cnt.LeaseAsks, cnt.Leases, cnt.KVReads)
			}
			if calls := h.composeCalls(); len(calls) != 0 {
				t.Errorf("compose calls: %v", calls)
			}
			res, detail := h.lastReport()
			if res != "failed" || !strings.HasPrefix(detail, "DOCKER_NOT_FOUND: ") || !strings.Contains(detail, c.detail) || !strings.Contains(detail, "no lease was asked") {
				t.Errorf("report %s %q", res, detail)
			}
			if rec := h.record(); rec.State != "Refused" || rec.Refusal == nil || rec.Refusal.Code != vocab.DockerNotFound {
				t.Errorf("state %s refusal %+v", rec.State, rec.Refusal)
			} else if rec.Refusal.Reason != vocab.ReasonComposeMissing {
				// the CLI is there: the refusal is of compose v2, typed from the effect that found it
				t.Errorf("refusal reason %q, want %q", rec.Refusal.Reason, vocab.ReasonComposeMissing)
			}
			doc, err := explain.Build(h.st, explain.Options{Now: h.clock.Now()})
			if err != nil || doc.Why == nil || !strings.Contains(doc.Why.Fault, "is there but compose v2 is not") {
				t.Errorf("explain's why %+v (%v)", doc.Why, err)
			}
			h.dockerKnob("compose-version", "")
			h.wantExit(h.tick(), 0)
			if res, _ := h.lastReport(); res != "applied" {
				t.Errorf("with compose v2 there: report %s", res)
			}
		})
	}
}

// A PRIVILEGED_REFUSED of fields only the allowlist does not name carries its reason
// (unlisted-field) from the policy to the refusal and its entry, and explain's fault says the
// fields are unlisted, not that they give power over the host; a refusal that mixes in a real
// finding carries no reason and keeps the code's words.
func TestPrivilegedRefusalCarriesItsReason(t *testing.T) {
	for _, c := range []struct {
		name   string
		adds   string
		reason vocab.Reason
		fault  string
	}{
		{"only an unlisted field", "    tty: true\n", vocab.ReasonUnlistedField, "does not name"},
		{"a field kept off the list for what it would do", "    mac_address: 02:42:ac:11:00:02\n", "", "kept off the list for what it would do"},
		{"an unlisted field and a real finding", "    mac_address: 02:42:ac:11:00:02\n    privileged: true\n", "", "power over the host"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			h.release("v1", func(f map[string][]byte) {
				f["compose.yaml"] = []byte(strings.Replace(string(f["compose.yaml"]), "    env_file: .env\n", "    env_file: .env\n"+c.adds, 1))
			})
			h.wantExit(h.tick(), 1)
			rec := h.record()
			if rec.Refusal == nil || rec.Refusal.Code != vocab.PrivilegedRefused || rec.Refusal.Reason != c.reason {
				t.Fatalf("refusal %+v, want PRIVILEGED_REFUSED with reason %q", rec.Refusal, c.reason)
			}
			e, ok := h.entry(func(e store.Entry) bool { return e.Code == vocab.PrivilegedRefused })
			if !ok || e.Reason != c.reason {
				t.Errorf("entry %+v, want reason %q", e, c.reason)
			}
			w := h.explainWhy()
			if w == nil || w.Reason != c.reason || !strings.Contains(w.Fault, c.fault) {
				t.Errorf("explain's why %+v, want reason %q and a fault saying %q", w, c.reason, c.fault)
			}
		})
	}
}
