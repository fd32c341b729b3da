package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/effects/bao"
	"github.com/tikali/monky-deployd/internal/testkit"
	"github.com/tikali/monky-deployd/test/e2e/registry"
)

const (
	envA    = "env-qa-02"
	envB    = "env-qa-03"
	envProd = "env-prod-01"
)

// TestAgainstRealPrograms walks one box from a fresh install to its retire against the real
// Vault, Docker engine, compose plugin and registry, then crashes another box mid-apply, then
// retires a prod box. The steps build on each other: a failed step stops the walk.
func TestAgainstRealPrograms(t *testing.T) {
	w := startWorld(t)
	for _, e := range []string{envA, envB, envProd} {
		w.seedSecrets(e)
	}
	a := w.newBox(t, envA)

	step := func(name string, f func(t *testing.T)) {
		t.Helper()
		if !t.Run(name, f) {
			t.FailNow()
		}
	}
	var shaV2 string

	step("bootstrap", func(t *testing.T) {
		a.t = t
		_, e, c, _ := a.runAgent("monky-deployd", nil, "bootstrap")
		if c != 0 {
			t.Fatalf("bootstrap: exit %d:\n%s", c, e)
		}
		if _, err := os.Stat(filepath.Join(a.dir, "bootstrap.jwt")); err == nil {
			t.Errorf("bootstrap.jwt is still on disk after the login")
		}
		if m := testkit.Mode(t, filepath.Join(a.stateDir, "bao.token")); m != 0o600 {
			t.Errorf("bao.token mode %o, want 600", m)
		}
		tok := a.token()
		if !strings.HasPrefix(tok, "hvs.") {
			t.Errorf("the stored token does not have the real Vault's shape (hvs.…)")
		}
		s, err := w.vault.LookupSelf(tok)
		if err != nil {
			t.Fatalf("the real Vault does not know the stored token: %v", err)
		}
		if got := s.Data["meta"].(map[string]any)["env_id"]; got != envA {
			t.Errorf("token meta env_id %v, want %s", got, envA)
		}
	})

	step("apply", func(t *testing.T) {
		a.t = t
		sha := w.desire(envA, "v1", rel{tag: "1"})
		a.tick(0)
		r := a.lastReport()
		if r.Result != effects.ResultApplied || r.Sha != sha {
			t.Errorf("report %s %s (%s), want applied %s", r.Result, r.Sha, r.Detail, sha)
		}
		a.assertHealthy("1")
		envs, _ := filepath.Glob(filepath.Join(a.deployDir, "releases", "*", ".env"))
		if len(envs) != 1 {
			t.Fatalf("rendered .env files: %v, want 1", envs)
		}
		if m := testkit.Mode(t, envs[0]); m != 0o600 {
			t.Errorf(".env mode %o, want 600", m)
		}
		raw, _ := os.ReadFile(envs[0])
		env := string(raw)
		for _, want := range []string{"GEMINI_API_KEY=" + geminiPinned(envA), "DB_PASSWORD=" + dbPassword(envA)} {
			if !strings.Contains(env, want) {
				t.Errorf(".env lacks the pinned/latest value of %s", strings.SplitN(want, "=", 2)[0])
			}
		}
		if strings.Contains(env, "-v3-") {
			t.Errorf(".env holds gemini v3; the manifest pins v2")
		}
		if m := testkit.Mode(t, filepath.Join(a.stateDir, "docker", "config.json")); m != 0o600 {
			t.Errorf("DOCKER_CONFIG/config.json mode %o, want 600", m)
		}
		if c := w.sim.Counts(envA); c.Leases != 1 {
			t.Errorf("leases %d, want 1", c.Leases)
		}
	})

	step("heartbeat", func(t *testing.T) {
		a.t = t
		before := a.containers()
		n := len(a.reports())
		a.tick(0)
		after := a.containers()
		for svc, c := range before {
			if after[svc].Name != c.Name || after[svc].Image != c.Image {
				t.Errorf("a heartbeat replaced %s", svc)
			}
		}
		if len(a.reports()) < n {
			t.Errorf("reports went backwards")
		}
		if r := a.lastReport(); r.Result != effects.ResultApplied {
			t.Errorf("after a heartbeat the last report is %s: %s", r.Result, r.Detail)
		}
	})

	step("heartbeat under compose "+composeOld, func(t *testing.T) {
		a.t = t
		a.usePlugin(pluginOld)
		defer a.usePlugin(pluginNew)
		n := len(a.reports())
		a.tick(0)
		rs := a.reports()
		if len(rs) > n {
			if r := rs[len(rs)-1]; r.Result != effects.ResultApplied || len(r.Containers) != 2 {
				t.Errorf("heartbeat under %s: report %s with %d containers (%s): the array form of ps was misread",
					composeOld, r.Result, len(r.Containers), r.Detail)
			}
		}
		if e := a.tick(0); strings.Contains(e, "unhealthy") {
			t.Errorf("heartbeat under %s saw unhealthy services:\n%s", composeOld, e)
		}
	})

	// green means serving: a service killed under the box (Exited (137), which compose ps
	// without --all does not list) is found by the next heartbeat and healed by compose up of
	// the applied release: no lease, no OpenBao read, the heal journaled
	step("a killed service is healed", func(t *testing.T) {
		a.t = t
		api, ok := a.containers()["api"]
		if !ok {
			t.Fatal("no api container")
		}
		if _, err := runCmd("", nil, dockerBin, "kill", api.ID); err != nil {
			t.Fatal(err)
		}
		leases := w.sim.Counts(envA).Leases
		e := a.tick(0)
		if !strings.Contains(e, "HEALED: found api (exited 137); ran compose up -d") {
			t.Errorf("no heal journaled:\n%s", e)
		}
		if c := a.containers()["api"]; c.State.Status != "running" {
			t.Errorf("api after the heal: %q", c.State.Status)
		}
		if r := a.lastReport(); r.Result != effects.ResultApplied {
			t.Errorf("after the heal the last report is %s: %s", r.Result, r.Detail)
		}
		if n := w.sim.Counts(envA).Leases; n != leases {
			t.Errorf("the heal asked %d leases", n-leases)
		}
	})

	// green means serving, row by row on the real engine: a one-shot that exits 0 completes, one
	// that exits 1 fails the gate, a crash loop never passes it, a container removed by hand is
	// healed by the next heartbeat
	step("green is judged against the release", func(t *testing.T) {
		a.t = t
		withMigrate := func(args string) func(img string) string {
			return func(img string) string {
				return fmt.Sprintf("services:\n  api:\n    image: %[1]s\n  migrate:\n    image: %[1]s\n    command: [%[2]s]\n    restart: \"no\"\n", img, args)
			}
		}
		sha := w.desire(envA, "oneshot-ok", rel{tag: "1", note: "oneshot ok", compose: withMigrate(`"-ls", "/"`)})
		e := a.tick(0)
		if r := a.lastReport(); r.Result != effects.ResultApplied || r.Sha != sha {
			t.Fatalf("a one-shot that exits 0: report %s %.12s (%s), want applied", r.Result, r.Sha, r.Detail)
		}
		if !strings.Contains(e, "1 completed (migrate)") {
			t.Errorf("the apply does not say the one-shot completed:\n%s", e)
		}
		e = a.tick(0) // the heartbeat: a completed one-shot is neither red nor healed
		if strings.Contains(e, "HEALED") || a.lastReport().Result != effects.ResultApplied {
			t.Errorf("the heartbeat after a completed one-shot: %s\n%s", a.lastReport().Result, e)
		}
		api, ok := a.containers()["api"]
		if !ok {
			t.Fatal("no api container")
		}
		if _, err := runCmd("", nil, dockerBin, "rm", "-f", api.ID); err != nil {
			t.Fatal(err)
		}
		leases := w.sim.Counts(envA).Leases
		e = a.tick(0)
		if !strings.Contains(e, "HEALED: found api (no container); ran compose up -d") {
			t.Errorf("a container removed by hand is not healed:\n%s", e)
		}
		if c := a.containers()["api"]; c.State.Status != "running" {
			t.Errorf("api after the heal: %q", c.State.Status)
		}
		if n := w.sim.Counts(envA).Leases; n != leases {
			t.Errorf("the heal asked %d leases", n-leases)
		}

		w.desire(envA, "oneshot-fails", rel{tag: "1", note: "oneshot fails", compose: withMigrate(`"-ls", "/nonexistent"`)})
		e = a.tick(1)
		if r := a.lastReport(); r.Result != effects.ResultFailed || !strings.Contains(r.Detail, "migrate (exited 1)") {
			t.Errorf("a one-shot that exits 1: report %s (%s), want failed naming migrate (exited 1)\n%s", r.Result, r.Detail, e)
		}
		if r := a.lastReport(); r.RevertedTo != "" {
			t.Errorf("a release without consent was reverted to %.12s", r.RevertedTo)
		}

		w.desire(envA, "crash-loop", rel{tag: "1", note: "crash loop", compose: func(img string) string {
			return fmt.Sprintf("services:\n  api:\n    image: %s\n    command: [\"-ls\", \"/nonexistent\"]\n    restart: always\n", img)
		}})
		e = a.tick(1)
		if r := a.lastReport(); r.Result != effects.ResultFailed || !strings.HasPrefix(r.Detail, "UNHEALTHY: ") || !strings.Contains(r.Detail, "api") {
			t.Errorf("a crash-looping service: report %s (%s), want failed UNHEALTHY naming api\n%s", r.Result, r.Detail, e)
		}
	})

	// a service that crashes every 20 s, its restart policy bringing it back, passes the gate
	// (up min_healthy_s) and is running at every look; the heartbeat after a restart tells it by
	// its Up, shorter than the time since it was seen running with the same ID, and heals it
	step("a slow crash loop is seen between heartbeats", func(t *testing.T) {
		a.t = t
		w.desire(envA, "slow-crash", rel{tag: "1", note: "slow crash", compose: func(img string) string {
			return fmt.Sprintf("services:\n  api:\n    image: %s\n    command: [\"-exit-after\", \"20s\"]\n    restart: always\n", img)
		}})
		a.tick(0)
		if r := a.lastReport(); r.Result != effects.ResultApplied {
			t.Fatalf("the release that crashes after 20 s: report %s (%s), want applied (it stays up min_healthy_s)", r.Result, r.Detail)
		}
		first := a.containers()["api"]
		deadline := time.Now().Add(60 * time.Second)
		for c := first; c.RestartCount == 0 || c.State.Status != "running"; c = a.containers()["api"] {
			if time.Now().After(deadline) {
				t.Fatalf("api did not crash and come back within 60 s: %q, %d restarts", c.State.Status, c.RestartCount)
			}
			time.Sleep(200 * time.Millisecond)
		}
		leases := w.sim.Counts(envA).Leases
		e := a.tick(0)
		if !strings.Contains(e, "HEALED: found api (restarted since it was seen running") {
			t.Errorf("the heartbeat after a restart did not see it:\n%s", e)
		}
		if c := a.containers()["api"]; c.ID != first.ID {
			t.Errorf("the engine's restart kept the container (%.12s), the heal replaced it with %.12s", first.ID, c.ID)
		}
		if n := w.sim.Counts(envA).Leases; n != leases {
			t.Errorf("the heal asked %d leases", n-leases)
		}
	})

	// a service the kernel kills for its mem_limit (OOM, exit 137) is not serving: the gate
	// fails at once for one nothing restarts, naming it, and the release is not reported applied
	step("a service OOM-killed by its mem_limit", func(t *testing.T) {
		a.t = t
		w.desire(envA, "oom", rel{tag: "1", note: "oom", compose: func(img string) string {
			return fmt.Sprintf("services:\n  api:\n    image: %[1]s\n  hog:\n    image: %[1]s\n    command: [\"-hog\", \"256\"]\n    mem_limit: 32m\n    restart: \"no\"\n", img)
		}})
		e := a.tick(1)
		if r := a.lastReport(); r.Result != effects.ResultFailed || !strings.Contains(r.Detail, "hog (exited 137)") {
			t.Errorf("a service OOM-killed: report %s (%s), want failed naming hog (exited 137)\n%s", r.Result, r.Detail, e)
		}
		// the premise: the kernel killed hog for its limit. The engine says so by OOMKilled; on
		// cgroup v1 it can miss the kernel's event (its flag then stays false, seen here once in
		// two runs), and the kill's SIGKILL (exit 137) is the word left: nothing else signals hog
		if c := a.containers()["hog"]; c.State.Status != "exited" || !c.State.OOMKilled && c.State.ExitCode != 137 {
			t.Errorf("the engine's word on hog: %q, exit %d, OOM-killed %t; want exited by the OOM killer", c.State.Status, c.State.ExitCode, c.State.OOMKilled)
		}
	})

	step("new release with --prune", func(t *testing.T) {
		a.t = t
		shaV2 = w.desire(envA, "v2", rel{tag: "2"})
		a.tick(0, "--prune")
		if r := a.lastReport(); r.Result != effects.ResultApplied || r.Sha != shaV2 {
			t.Errorf("report %s %s (%s), want applied %s", r.Result, r.Sha, r.Detail, shaV2)
		}
		a.assertHealthy("2")
		if _, err := runCmd("", nil, dockerBin, "image", "inspect", w.images["2"]); err != nil {
			t.Errorf("--prune removed the current image %s: %v", w.images["2"], err)
		}
	})

	// the last good release keeps serving: a release whose bundle consents to a revert and whose
	// service exits is left, in the same tick, for the release last healthy here (its kept
	// directory, .env and images; no lease, no OpenBao read); tenancy gets failed with
	// reverted_to, and the failed sha is not tried again until a new desire or resume
	step("a failed release that consents is reverted", func(t *testing.T) {
		a.t = t
		consent := map[string]string{"bundle.json": `{"agent": {"revert_on_failure": true}, "disk_need_bytes": 1048576}`}
		exits := func(img string) string {
			return fmt.Sprintf("services:\n  api:\n    image: %s\n    command: [\"-ls\", \"/nonexistent\"]\n    restart: \"no\"\n", img)
		}
		sha := w.desire(envA, "v3-exits", rel{tag: "2", note: "exits, consents", compose: exits, files: consent})
		e := a.tick(1)
		r := a.lastReport()
		if r.Result != effects.ResultFailed || r.Sha != sha || r.RevertedTo != shaV2 || !strings.Contains(r.Detail, "api (exited 1)") ||
			!strings.Contains(r.Detail, "reverted to "+shaV2[:12]) {
			t.Fatalf("report %s %.12s reverted_to %.12s (%s), want failed for v3 reverted_to v2\n%s", r.Result, r.Sha, r.RevertedTo, r.Detail, e)
		}
		a.assertHealthy("2")
		if target, err := os.Readlink(filepath.Join(a.deployDir, "current")); err != nil || filepath.Base(target) != shaV2 {
			t.Errorf("current → %q (%v), want v2's release", target, err)
		}
		env, err := os.ReadFile(filepath.Join(a.release(shaV2), ".env"))
		if err != nil || !strings.Contains(string(env), "APP_RELEASE=2") {
			t.Errorf("v2's .env after the revert: %v", err)
		}
		before, counts := a.containers(), w.sim.Counts(envA)
		e = a.tick(1) // remembered: not applied again
		a.sameContainers(before, "by a tick after the revert")
		if c := w.sim.Counts(envA); c.Leases != counts.Leases || c.KVReads != counts.KVReads || c.BundleFetches != counts.BundleFetches {
			t.Errorf("the reverted sha was tried again: %+v → %+v", counts, c)
		}
		if !strings.Contains(e, "reverted to "+shaV2[:12]) {
			t.Errorf("the tick after the revert does not say so:\n%s", e)
		}
		out, _, _, _ := a.runAgent("monky-deployd", nil, "explain")
		if !strings.Contains(out, shaV2[:12]+", serves again") {
			t.Errorf("explain after the revert:\n%s", out)
		}
		if err := w.sim.SetDesired(envA, shaV2); err != nil { // back to what runs
			t.Fatal(err)
		}
		a.tick(0)
		a.sameContainers(before, "by the heartbeat after the revert")
	})

	// a held box checks in and heartbeats, and a new desire waits for the hold to end
	step("a held box does not apply", func(t *testing.T) {
		a.t = t
		if _, e, c, _ := a.runAgent("monky-deployd", nil, "hold", "--for", "1h", "--reason", "e2e: nightly freeze"); c != 0 {
			t.Fatalf("hold: exit %d\n%s", c, e)
		}
		sha := w.desire(envA, "v2-held", rel{tag: "2", note: "held"})
		before, fetches := a.containers(), w.sim.Counts(envA).BundleFetches
		e := a.tick(0)
		a.sameContainers(before, "while held")
		if n := w.sim.Counts(envA).BundleFetches; n != fetches {
			t.Errorf("a held box fetched %d bundles", n-fetches)
		}
		if r := a.lastReport(); r.Sha != shaV2 || r.Why == nil || r.Why.Code != "HELD" {
			t.Errorf("a held box's report: %.12s why %+v\n%s", r.Sha, r.Why, e)
		}
		if _, e, c, _ := a.runAgent("monky-deployd", nil, "hold", "--release"); c != 0 {
			t.Fatalf("hold --release: exit %d\n%s", c, e)
		}
		a.tick(0)
		if r := a.lastReport(); r.Result != effects.ResultApplied || r.Sha != sha {
			t.Errorf("after the hold: report %s %.12s, want applied v2-held", r.Result, r.Sha)
		}
		a.assertHealthy("2")
		shaV2 = sha // what runs now, for the steps that follow (going back would be a rollback)
	})

	step("another env's secret path", func(t *testing.T) {
		a.t = t
		w.desire(envA, "v2-other-env", rel{tag: "2", otherEnv: envB})
		e := a.tick(1)
		if !strings.Contains(e, "MANIFEST_PATH_REFUSED") {
			t.Errorf("stderr does not name MANIFEST_PATH_REFUSED:\n%s", e)
		}
		a.assertHealthy("2") // nothing was touched
		// The same read, made directly with the agent's OpenBao client and the box's token:
		// the real Vault's templated policy answers 403.
		c, err := bao.New(w.vault.Addr, w.vault.HTTPClient(), 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		own, err := c.ReadKV(ctx, a.token(), "monky/data/"+envA+"/see/db", "password", 0)
		if err != nil || own != dbPassword(envA) {
			t.Fatalf("positive control: reading the box's own env failed: %v", err)
		}
		_, err = c.ReadKV(ctx, a.token(), "monky/data/"+envB+"/see/db", "password", 0)
		if err == nil {
			t.Fatalf("the real Vault let %s's token read %s's secret", envA, envB)
		}
		if code := effects.CodeOf(err); code != "BAO_PERMISSION_DENIED" || !strings.Contains(err.Error(), "403") {
			t.Errorf("another env's read: %v (code %q), want 403 BAO_PERMISSION_DENIED", err, code)
		}
		if err := w.sim.SetDesired(envA, shaV2); err != nil { // back to what runs
			t.Fatal(err)
		}
		a.tick(0)
	})

	step("wrong registry password", func(t *testing.T) {
		a.t = t
		w.setRegistryPassword(envA, w.wrongPwd)
		sha := w.desire(envA, "v3-wrong-pw", rel{tag: "3"})
		_, e, c, _ := a.runAgent("monky-deployd", nil, "run", "--once")
		if c == 0 {
			t.Fatalf("a pull with a wrong password exited 0:\n%s", e)
		}
		r := a.lastReport()
		if r.Result != effects.ResultFailed || r.Sha != sha {
			t.Fatalf("report %s %s, want failed %s", r.Result, r.Sha, sha)
		}
		if !strings.Contains(r.Detail, registry.DeniedMessage) && !strings.Contains(r.Detail, "unauthorized") {
			t.Errorf("the failed report does not carry the registry's answer: %q", r.Detail)
		}
		if strings.Contains(r.Detail+r.LogTail+e, w.wrongPwd) {
			t.Errorf("the registry password leaked into the report or stderr")
		}
		t.Logf("failed pull detail: %s (exit %d)", r.Detail, c)
		w.setRegistryPassword(envA, w.reg.Password)
		w.desire(envA, "v3", rel{tag: "3", note: "password fixed"})
		a.tick(0)
		a.assertHealthy("3")
	})

	// What runs is exactly what was checked: a compose.override.yaml beside the compose file
	// (which compose would load by itself) changes nothing, and secrets holding quotes, `$`,
	// `#` and backslashes reach the container exactly as OpenBao holds them.
	step("override ignored, secrets unchanged", func(t *testing.T) {
		a.t = t
		vals := map[string]any{}
		for k, v := range trickySecrets {
			vals[strings.ToLower(k)] = v
		}
		w.vault.Put(t, envA, "tricky", vals)
		sha := w.desire(envA, "v3-override-tricky", rel{tag: "3", override: "1", tricky: true})
		a.tick(0)
		if r := a.lastReport(); r.Result != effects.ResultApplied || r.Sha != sha {
			t.Fatalf("report %s %s (%s), want applied %s", r.Result, r.Sha, r.Detail, sha)
		}
		if _, err := os.Stat(filepath.Join(a.deployDir, "releases", sha, "compose.override.yaml")); err != nil {
			t.Fatalf("the release does not hold the override, the proof proves nothing: %v", err)
		}
		a.assertHealthy("3") // the override's image (tag 1) was not applied
		cs := a.containers()
		api := cs["api"]
		if api.HostConfig.Privileged {
			t.Errorf("docker inspect: api runs privileged: compose.override.yaml was applied")
		}
		env := map[string]string{}
		for _, kv := range api.Config.Env {
			k, v, _ := strings.Cut(kv, "=")
			env[k] = v
		}
		for k, want := range trickySecrets {
			if got, ok := env[k]; !ok || got != want {
				t.Errorf("docker inspect: api's %s = %q (set %t), want %q", k, got, ok, want)
			}
		}
		if _, ok := env["COMPOSE_FILE"]; ok {
			t.Errorf("a secret set COMPOSE_FILE in the container's environment")
		}
	})

	// Issue 29, class 2, on the real engine: what a container can do to the release directory
	// changes nothing compose runs.
	step("a symlink to / planted in a bind", func(t *testing.T) {
		a.t = t
		// a writable bind of ./data holding ./data/conf, which worker binds: api could make it
		// a symlink to / before worker's next start. Refused before the lease.
		w.desire(envA, "plant-refused", rel{tag: "3", note: "plant refused", files: map[string]string{"data/conf/app.toml": "x = 1\n"},
			compose: func(img string) string {
				return fmt.Sprintf("services:\n  api:\n    image: %[1]s\n    volumes: [\"./data:/data\"]\n  worker:\n    image: %[1]s\n    environment: {LISTEN: \":8081\"}\n    volumes: [\"./data/conf:/conf:ro\"]\n", img)
			}})
		a.refusedBeforeLease("writable bind ./data holds ./data/conf, which service worker binds")
		a.assertHealthy("3")

		// allowed: api writes ./data, worker binds ./conf beside it. The container can plant a
		// symlink to / in its own bind; worker still sees the release's conf, and the agent
		// runs no compose call on the changed release.
		sha := w.desire(envA, "plant", rel{tag: "3", note: "plant", files: map[string]string{"data/.keep": "", "conf/app.toml": "x = 1\n"},
			compose: func(img string) string {
				return fmt.Sprintf("services:\n  api:\n    image: %[1]s\n    volumes: [\"./data:/data\"]\n  worker:\n    image: %[1]s\n    environment: {LISTEN: \":8081\"}\n    volumes: [\"./conf:/conf:ro\"]\n", img)
			}})
		a.tick(0)
		if r := a.lastReport(); r.Result != effects.ResultApplied || r.Sha != sha {
			t.Fatalf("report %s %s (%s), want applied %s", r.Result, r.Sha, r.Detail, sha)
		}
		a.assertHealthy("3")
		before := a.containers()
		if out, err := a.exec("api", "-plant", "/data/conf"); err != nil {
			t.Fatalf("api could not write its own bind: %v %s", err, out)
		}
		planted := filepath.Join(a.release(sha), "data", "conf")
		if fi, err := os.Lstat(planted); err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Fatalf("the container's symlink is not in the release (%v): the case proves nothing", err)
		}
		out, err := a.exec("worker", "-ls", "/conf")
		if err != nil || strings.TrimSpace(out) != "app.toml" {
			t.Errorf("worker sees in /conf %q (%v), want the release's app.toml alone", out, err)
		}
		e := a.tick(1)
		if !strings.Contains(e, "RELEASE_CHANGED") || !strings.Contains(e, "data/conf is a symlink (→ /)") {
			t.Errorf("the tick after the plant does not name RELEASE_CHANGED and the symlink:\n%s", e)
		}
		a.sameContainers(before, "after the plant: compose ran on the changed release")
		// the heartbeat's report names the fault, not an absence of containers that still run
		if r := a.lastReport(); r.Result != effects.ResultFailed || !strings.HasPrefix(r.Detail, "RELEASE_CHANGED: ") || strings.Contains(r.Detail, "no containers") {
			t.Errorf("after the plant: report %s %.12s: %s, want failed RELEASE_CHANGED", r.Result, r.Sha, r.Detail)
		}
	})

	step("a rewritten compose file after a cut up", func(t *testing.T) {
		a.t = t
		// the release directory mounted read-write would let api rewrite compose.yaml: refused
		w.desire(envA, "release-rw", rel{tag: "3", note: "release rw",
			compose: func(img string) string {
				return fmt.Sprintf("services:\n  api:\n    image: %[1]s\n    volumes: [\"./:/release\"]\n  worker:\n    image: %[1]s\n    environment: {LISTEN: \":8081\"}\n", img)
			}})
		a.refusedBeforeLease("writable bind of the release directory → /release")
		// `up` ran and the tick was cut before it was committed; meanwhile compose.yaml was
		// rewritten (as a service holding the release read-write would) to run api privileged
		// with the host's / mounted. The tick that resumes at `up` runs nothing.
		sha := w.desire(envA, "v1-cut", rel{tag: "1", note: "cut up"})
		_, e, c, sig := a.runAgent("monky-deployd", []string{"MONKY_DEPLOYD_FAILPOINT=before:Up"}, "run", "--once")
		if sig != syscall.SIGKILL {
			t.Fatalf("failpoint before:Up: exit %d signal %v, want SIGKILL:\n%s", c, sig, e)
		}
		before := a.containers()
		for _, svc := range []string{"api", "worker"} {
			if c, ok := before[svc]; !ok || c.Config.Image != w.images["1"] {
				t.Fatalf("after the cut up, %s runs %q, want %s: the cut came elsewhere", svc, c.Config.Image, w.images["1"])
			}
		}
		evil := fmt.Sprintf("services:\n  api:\n    image: %s\n    privileged: true\n    volumes: [\"/:/host\"]\n", w.images["1"])
		if err := os.WriteFile(filepath.Join(a.release(sha), "compose.yaml"), []byte(evil), 0o644); err != nil {
			t.Fatal(err)
		}
		if e := a.tick(1); !strings.Contains(e, "RELEASE_CHANGED") {
			t.Errorf("the resumed tick does not name RELEASE_CHANGED:\n%s", e)
		}
		// and the model compose runs lies in no container's mount, so none can rewrite it
		model := filepath.Join(a.deployDir, "resolved", sha+".yaml")
		if _, err := os.Stat(model); err != nil {
			t.Fatalf("the release's resolved model: %v", err)
		}
		for svc, c := range a.containers() {
			if c.HostConfig.Privileged {
				t.Errorf("docker inspect: %s runs privileged: the rewritten file ran", svc)
			}
			for _, m := range c.Mounts {
				if m.Source == "/" || m.Destination == "/host" {
					t.Errorf("docker inspect: %s mounts %s at %s: the rewritten file ran", svc, m.Source, m.Destination)
				}
				if m.Source != "" && strings.HasPrefix(model, strings.TrimSuffix(m.Source, "/")+"/") {
					t.Errorf("docker inspect: %s mounts %s, which holds the resolved model", svc, m.Source)
				}
			}
		}
		a.sameContainers(before, "after the rewrite: compose ran on the rewritten release")
		if _, err := a.exec("api", "-ls", "/host"); err == nil {
			t.Errorf("api can list /host")
		}
	})

	// Issue 29, class 3: a local volume whose driver_opts mount an overlay of the host's /etc.
	step("an overlay volume", func(t *testing.T) {
		a.t = t
		w.desire(envA, "overlay", rel{tag: "3", note: "overlay",
			compose: func(img string) string {
				return fmt.Sprintf(`services:
  api:
    image: %[1]s
    volumes: ["hostetc:/host-etc"]
  worker:
    image: %[1]s
    environment: {LISTEN: ":8081"}
volumes:
  hostetc:
    driver: local
    driver_opts: {type: overlay, device: overlay, o: "lowerdir=/etc,upperdir=/tmp/monky-e2e-up,workdir=/tmp/monky-e2e-work"}
`, img)
			}})
		a.refusedBeforeLease("volume hostetc: driver_opts is not allowed (device, o=lowerdir=/etc")
		if a.volumeExists("hostetc") {
			t.Errorf("the engine holds the overlay volume %s_hostetc", a.project)
		}
		for svc, c := range a.containers() {
			for _, m := range c.Mounts {
				if m.Destination == "/host-etc" {
					t.Errorf("docker inspect: %s mounts %s at /host-etc", svc, m.Name)
				}
			}
		}
		if _, err := a.exec("api", "-ls", "/host-etc"); err == nil {
			t.Errorf("api can list /host-etc")
		}
	})

	// Issue 37: a network whose ipam picks a subnet. On the real engine the host routed that
	// prefix into the project's bridge while the project ran (and a prefix of the host's own LAN
	// took the host's traffic to its neighbours). Now it is refused before any lease, and the
	// host's routing table is the same before and after the tick. The lines of the containers'
	// own veth ends are left out: a running container's link-local address may come up late,
	// and a veth never carries a route the project chose.
	step("an ipam subnet", func(t *testing.T) {
		a.t = t
		const subnet = "10.237.91.0/24"
		routes := func() string {
			out, err := runCmd("", nil, "ip", "route", "show", "table", "all")
			if err != nil {
				t.Fatalf("ip route: %v", err)
			}
			return withoutVeths(out)
		}
		before := routes()
		w.desire(envA, "ipam", rel{tag: "3", note: "ipam",
			compose: func(img string) string {
				return fmt.Sprintf(`services:
  api:
    image: %[1]s
    networks:
      lan:
        ipv4_address: 10.237.91.10
  worker:
    image: %[1]s
    environment: {LISTEN: ":8081"}
networks:
  lan:
    ipam:
      config:
        - subnet: %[2]s
`, img, subnet)
			}})
		a.refusedBeforeLease("network lan: ipam is not allowed")
		after := routes()
		if after != before {
			t.Errorf("the host's routing table changed across the tick\n--- before\n%s--- after\n%s", before, after)
		}
		if strings.Contains(after, subnet) {
			t.Errorf("the host routes %s:\n%s", subnet, after)
		}
	})

	step("unhealthy service", func(t *testing.T) {
		a.t = t
		sha := w.desire(envA, "v3-unhealthy", rel{tag: "3", unhealthy: true})
		_, e, c, _ := a.runAgent("monky-deployd", nil, "run", "--once")
		if c == 0 {
			t.Fatalf("an unhealthy service exited 0:\n%s", e)
		}
		r := a.lastReport()
		if r.Result != effects.ResultFailed || r.Sha != sha {
			t.Fatalf("report %s %s (%s), want failed %s", r.Result, r.Sha, r.Detail, sha)
		}
		if !strings.Contains(r.Detail, "api") {
			t.Errorf("the failed report does not name the api service: %q", r.Detail)
		}
		if !strings.Contains(r.LogTail, "cannot reach the database") {
			t.Errorf("log tail lacks the service's own line: %q", r.LogTail)
		}
		if strings.Contains(r.LogTail, dbPassword(envA)) || strings.Contains(e, dbPassword(envA)) {
			t.Errorf("the DB password the service printed is in the report or stderr unmasked")
		}
		t.Logf("unhealthy: exit %d, detail %s", c, r.Detail)
	})

	step("retire with purge", func(t *testing.T) {
		a.t = t
		if !a.volumeExists("worker-data") {
			t.Fatalf("volume %s_worker-data missing before the retire", a.project)
		}
		a.retire()
		if a.volumeExists("worker-data") {
			t.Errorf("purge_volumes: volume %s_worker-data survived", a.project)
		}
	})

	step("kill -9 before compose up resumes with one lease", func(t *testing.T) {
		b := w.newBox(t, envB)
		if _, e, c, _ := b.runAgent("monky-deployd", nil, "bootstrap"); c != 0 {
			t.Fatalf("bootstrap: exit %d:\n%s", c, e)
		}
		sha := w.desire(envB, "v1", rel{tag: "1"})
		_, e, c, sig := b.runAgent("monky-deployd", []string{"MONKY_DEPLOYD_FAILPOINT=before:Up"}, "run", "--once")
		if sig != syscall.SIGKILL {
			t.Fatalf("failpoint before:Up: exit %d signal %v, want SIGKILL:\n%s", c, sig, e)
		}
		b.tick(0)
		cn := w.sim.Counts(envB)
		if cn.Leases != 1 {
			t.Errorf("leases %d, want 1", cn.Leases)
		}
		var applied int
		for _, r := range b.reports() {
			if r.Result == effects.ResultApplied && r.Sha == sha {
				applied++
			}
		}
		if applied != 1 {
			t.Errorf("applied reports %d, want 1: %+v", applied, b.reports())
		}
		b.assertHealthy("1")

		// superseded grant: the real Vault still logs it in; tenancy refuses its token.
		if _, err := w.sim.RevealKit(envB); err != nil {
			t.Fatal(err)
		}
		s, err := w.vault.Login(b.grant)
		if err != nil {
			t.Fatalf("the real Vault refused a superseded (unexpired) grant: %v", err)
		}
		st, body := w.checkin(envB, s.Auth.ClientToken)
		if st != 401 || !strings.Contains(body, "AGENT_UNAUTHENTICATED") {
			t.Errorf("tenancy answered the superseded grant's token %d %s, want 401 AGENT_UNAUTHENTICATED", st, body)
		}
		e = b.tick(1)
		if !strings.Contains(e, "AGENT_UNAUTHENTICATED") {
			t.Errorf("the box's tick after the supersession:\n%s", e)
		}
	})

	step("retire on prod keeps volumes", func(t *testing.T) {
		p := w.newBox(t, envProd)
		if _, e, c, _ := p.runAgent("monky-deployd", nil, "bootstrap"); c != 0 {
			t.Fatalf("bootstrap: exit %d:\n%s", c, e)
		}
		w.desire(envProd, "v1", rel{tag: "1"})
		p.tick(0)
		p.assertHealthy("1")
		p.retire()
		if !p.volumeExists("worker-data") {
			t.Errorf("prod: purge_volumes removed %s_worker-data; volumes are never removed on prod", p.project)
		}
	})

	// No secret, token or grant in anything an agent printed.
	a.t = t
	a.noSecretPrinted()
}
