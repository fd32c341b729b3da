package e2e

import (
	"bufio"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tikali/monky-deployd/effects"
)

// TestFaultsUnderTheBox: what goes wrong under a converged box rather than in a release, on the
// real programs — OpenBao sealed past stuck_after_s, the engine stopped, the engine
// restarted, the state disk full — a release pruned past keep_releases taking its image with
// it, and a disk check that fails reclaimed before it refuses. Each row asserts the exit code, the words, status's verdict and exit, the metrics,
// what tenancy was told, and that no lease or secret read happened where none should.
func TestFaultsUnderTheBox(t *testing.T) {
	w := startWorld(t)
	w.seedSecrets(envA)
	w.seedSecrets(envB)
	metrics := filepath.Join(t.TempDir(), "monky-deployd.prom")
	a := w.newBox(t, envA)
	a.appendConfig(fmt.Sprintf("stuck_after_s: 5\nmetrics_path: %q\n", metrics))

	step := func(name string, f func(t *testing.T)) {
		t.Helper()
		if !t.Run(name, f) {
			t.FailNow()
		}
	}
	step("bootstrap and apply", func(t *testing.T) {
		a.t = t
		if _, e, c, _ := a.runAgent("monky-deployd", nil, "bootstrap"); c != 0 {
			t.Fatalf("bootstrap: exit %d:\n%s", c, e)
		}
		sha := w.desire(envA, "v1", rel{tag: "1"})
		a.tick(0)
		if r := a.lastReport(); r.Result != effects.ResultApplied || r.Sha != sha {
			t.Fatalf("report %s %.12s (%s), want applied v1", r.Result, r.Sha, r.Detail)
		}
		a.wantStatus(0, "converged")
	})

	// OpenBao sealed (the real Vault's 503 "Vault is sealed") while a new release waits: working
	// on it until stuck_after_s, a person after, timed from the first tick; v1 keeps running, no
	// secret is read, one lease serves the whole outage; unsealed, the next tick applies v2
	step("OpenBao sealed past stuck_after_s", func(t *testing.T) {
		a.t = t
		sha := w.desire(envA, "v2", rel{tag: "2"})
		before := a.containers()
		w.vault.Seal(t)
		unsealed := false
		defer func() {
			if !unsealed {
				w.vault.Unseal(t)
			}
		}()
		leases, reads := w.sim.Counts(envA).Leases, w.vault.KVReads()
		// tenancy checks the box's bearer at the same OpenBao: the check-in is where the box
		// meets the outage first, answered 503 with tenancy's own code
		e := a.tick(75)
		if !strings.Contains(e, "OPENBAO_UNAVAILABLE") {
			t.Errorf("the first tick with OpenBao sealed does not name it:\n%s", e)
		}
		a.wantStatus(0, "OPENBAO_UNAVAILABLE")
		a.wantMetric(metrics, "monky_deployd_needs_person", 0)
		time.Sleep(6 * time.Second)
		e = a.tick(75)
		out := a.wantStatus(1, "needs a person (OPENBAO_UNAVAILABLE)")
		if !strings.Contains(out, "Tenancy answered the check-in with a server error of its own") || strings.Contains(out, "ziti-edge-tunnel") {
			t.Errorf("status past stuck_after_s does not say tenancy answered, or sends a person to the tunneller:\n%s", out)
		}
		a.wantMetric(metrics, "monky_deployd_needs_person", 1)
		if n := w.vault.KVReads() - reads; n != 0 {
			t.Errorf("%d secret reads answered while Vault was sealed were asked", n)
		}
		if n := w.sim.Counts(envA).Leases - leases; n > 1 {
			t.Errorf("the outage took %d leases, want at most 1:\n%s", n, e)
		}
		a.sameContainers(before, "OpenBao is sealed")
		w.vault.Unseal(t)
		unsealed = true
		a.tick(0)
		a.wantApplied(sha, "after the unseal", "v2")
		a.assertHealthy("2")
		a.wantStatus(0, "converged")
		a.wantMetric(metrics, "monky_deployd_needs_person", 0)
	})

	// the engine stopped (Debian's docker.io with its daemon down): DOCKER_ENGINE_DOWN, temporary,
	// before any lease or secret read, not called a registry fault; the engine back, the release
	// applies
	step("the engine stopped", func(t *testing.T) {
		a.t = t
		sha := w.desire(envA, "v3", rel{tag: "3"})
		leases, reads := w.sim.Counts(envA).Leases, w.vault.KVReads()
		start := stopEngine(t)
		defer start() // whatever fails below, the engine runs again
		_, e, c, _ := a.runAgent("monky-deployd", nil, "run", "--once")
		out, _, sc, _ := a.runAgent("monky-deployd", nil, "status")
		start()
		if c != 75 || !strings.Contains(e, "DOCKER_ENGINE_DOWN") {
			t.Errorf("a tick with the engine stopped: exit %d, want 75 DOCKER_ENGINE_DOWN:\n%s", c, e)
		}
		if strings.Contains(e, "COMPOSE_PULL_FAILED") || strings.Contains(e, "registry") {
			t.Errorf("the engine down is called a registry fault:\n%s", e)
		}
		if n := w.sim.Counts(envA).Leases - leases; n != 0 {
			t.Errorf("the engine down took %d leases", n)
		}
		if n := w.vault.KVReads() - reads; n != 0 {
			t.Errorf("the engine down read %d secrets", n)
		}
		if sc != 0 || !strings.Contains(out, "DOCKER_ENGINE_DOWN") {
			t.Errorf("status with the engine stopped: exit %d, want 0 naming DOCKER_ENGINE_DOWN:\n%s", sc, out)
		}
		a.tick(0)
		a.wantApplied(sha, "the engine back", "v3")
		a.assertHealthy("3")
	})

	// keep_releases is 2: v3's apply pruned v1's release, and with it the image only v1 named;
	// the kept releases' images stay
	step("a pruned release's image is removed", func(t *testing.T) {
		a.t = t
		if _, err := runCmd("", nil, dockerBin, "image", "inspect", w.images["1"]); err == nil {
			t.Errorf("v1's image %s is still on the engine after its release was pruned", w.images["1"])
		}
		for _, tag := range []string{"2", "3"} {
			if _, err := runCmd("", nil, dockerBin, "image", "inspect", w.images[tag]); err != nil {
				t.Errorf("a kept release's image %s was removed: %v", w.images[tag], err)
			}
		}
	})

	// dockerd stopped and started again under the box: the release's containers (no restart
	// policy) are left exited; the next heartbeat heals them with compose up, no lease, no read
	step("the engine restarted under the box", func(t *testing.T) {
		a.t = t
		live, err := runCmd("", nil, dockerBin, "info", "-f", "{{.LiveRestoreEnabled}}")
		if err != nil {
			t.Fatal(err)
		}
		restartEngine(t)
		leases, reads := w.sim.Counts(envA).Leases, w.vault.KVReads()
		e := a.tick(0)
		switch healed := strings.Contains(e, "HEALED: found "); {
		case strings.TrimSpace(live) == "true" && healed: // live-restore keeps the containers running
			t.Errorf("the engine kept the containers (live-restore), yet the heartbeat healed:\n%s", e)
		case strings.TrimSpace(live) != "true" && !healed:
			t.Errorf("the heartbeat after the engine's restart healed nothing:\n%s", e)
		}
		a.assertHealthy("3")
		if n := w.sim.Counts(envA).Leases - leases; n != 0 {
			t.Errorf("the heal took %d leases", n)
		}
		if n := w.vault.KVReads() - reads; n != 0 {
			t.Errorf("the heal read %d secrets", n)
		}
		a.wantStatus(0, "converged")
	})

	// the image storage short of the configured headroom while an image of the release's own
	// repository that no kept release names holds the difference (a fat image imported by hand):
	// the disk check reclaims it before refusing DISK_INSUFFICIENT, measures again and applies
	step("a disk check that fails is reclaimed, then applies", func(t *testing.T) {
		a.t = t
		repo := w.images["3"][:strings.LastIndex(w.images["3"], ":")]
		stale := repo + ":stale-by-hand"
		importFat(t, stale, 512<<20)
		defer func() { _, _ = runCmd("", nil, dockerBin, "image", "rm", stale) }()
		root, err := runCmd("", nil, dockerBin, "info", "-f", "{{.DockerRootDir}}")
		if err != nil {
			t.Fatal(err)
		}
		var st syscall.Statfs_t
		if err := syscall.Statfs(strings.TrimSpace(root), &st); err != nil {
			t.Fatal(err)
		}
		// short by 256 MiB now; 512 MiB freed leaves 256 MiB to spare for whatever else writes
		free := int64(st.Bavail) * st.Bsize
		a.appendConfig(fmt.Sprintf("disk:\n  headroom_bytes: %d\n", free+256<<20))
		sha := w.desire(envA, "v4", rel{tag: "2", note: "v4: v2's image again"})
		e := a.tick(0)
		if !strings.Contains(e, "before refusing DISK_INSUFFICIENT") || !strings.Contains(e, "stale-by-hand") {
			t.Errorf("the tick does not say it reclaimed the stale image before refusing:\n%s", e)
		}
		if _, err := runCmd("", nil, dockerBin, "image", "inspect", stale); err == nil {
			t.Errorf("the image no kept release names (%s) is still on the engine", stale)
		}
		a.wantApplied(sha, "after the reclaim", "v4")
		a.assertHealthy("2")
		out, _, _, _ := a.runAgent("monky-deployd", nil, "explain")
		if !strings.Contains(out, "stale-by-hand") {
			t.Errorf("explain's journal does not name the image the reclaim removed:\n%s", out)
		}
	})

	// the state disk full (a small file system of its own, filled): STATE_UNWRITABLE, red on
	// status and in the metrics from the first tick, naming the cause; space freed, the next tick
	// applies by itself
	step("the state disk full", func(t *testing.T) {
		dir := smallDisk(t, 32<<20)
		bm := filepath.Join(t.TempDir(), "monky-deployd.prom")
		b := w.newBoxIn(t, envB, dir)
		b.appendConfig(fmt.Sprintf("metrics_path: %q\n", bm))
		if _, e, c, _ := b.runAgent("monky-deployd", nil, "bootstrap"); c != 0 {
			t.Fatalf("bootstrap: exit %d:\n%s", c, e)
		}
		w.desire(envB, "v1", rel{tag: "2"})
		b.tick(0)
		b.wantStatus(0, "converged")
		filler := fill(t, dir)
		sha := w.desire(envB, "v2", rel{tag: "3"})
		for i := 0; i < 2; i++ {
			e := b.tick(1)
			if !strings.Contains(e, "STATE_UNWRITABLE") || !strings.Contains(e, "no space left on device") {
				t.Errorf("tick %d on a full disk: does not name STATE_UNWRITABLE and the cause:\n%s", i+1, e)
			}
			out := b.wantStatus(1, "STATE_UNWRITABLE")
			if !strings.Contains(out, "no space left") {
				t.Errorf("status on a full disk does not say why:\n%s", out)
			}
			b.wantMetric(bm, "monky_deployd_needs_person", 1)
		}
		if err := os.Remove(filler); err != nil {
			t.Fatal(err)
		}
		b.tick(0)
		b.wantApplied(sha, "space freed", "v2")
		b.assertHealthy("3")
		b.wantStatus(0, "converged")
		b.wantMetric(bm, "monky_deployd_needs_person", 0)
		b.noSecretPrinted()
	})

	a.t = t
	a.noSecretPrinted()
}

// appendConfig adds lines to the box's config.yaml.
func (b *box) appendConfig(lines string) {
	b.t.Helper()
	f, err := os.OpenFile(b.cfg, os.O_APPEND|os.O_WRONLY, 0)
	if err == nil {
		_, err = f.WriteString(lines)
		err = errors.Join(err, f.Close())
	}
	if err != nil {
		b.t.Fatal(err)
	}
}

// wantApplied fails unless tenancy's last report from the box is applied for sha (release name).
func (b *box) wantApplied(sha, when, name string) {
	b.t.Helper()
	if r := b.lastReport(); r.Result != effects.ResultApplied || r.Sha != sha {
		b.t.Errorf("%s: report %s %.12s (%s), want applied %s", when, r.Result, r.Sha, r.Detail, name)
	}
}

// wantStatus runs `status` and fails unless it exits code and says want; it returns what it said.
func (b *box) wantStatus(code int, want string) string {
	b.t.Helper()
	out, e, c, _ := b.runAgent("monky-deployd", nil, "status")
	if c != code || !strings.Contains(out, want) {
		b.t.Errorf("status: exit %d, want %d saying %q:\n%s%s", c, code, want, out, e)
	}
	return out
}

// wantMetric fails unless the textfile at path holds name (no labels) with value v.
func (b *box) wantMetric(path, name string, v float64) {
	b.t.Helper()
	f, err := os.Open(path)
	if err != nil {
		b.t.Errorf("metrics: %v", err)
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) == 2 && (fs[0] == name || strings.HasPrefix(fs[0], name+"{")) {
			if got, err := strconv.ParseFloat(fs[1], 64); err != nil || got != v {
				b.t.Errorf("metrics: %s is %s, want %g", name, fs[1], v)
			}
			return
		}
	}
	b.t.Errorf("metrics: no %s in %s", name, path)
}

// noSecretPrinted fails when anything the box's agent printed holds a secret, token or grant.
func (b *box) noSecretPrinted() {
	for i, o := range b.outputs {
		for name, n := range map[string]string{"db": dbPassword(b.env), "gemini": geminiPinned(b.env), "grant": b.grant} {
			if strings.Contains(o, n) {
				b.t.Errorf("%s output %d holds the %s", b.env, i, name)
			}
		}
	}
}

// smallDisk mounts a tmpfs of size bytes at a new directory and unmounts it when t ends (after
// the boxes made under it are taken down). It needs root: the suite's engine does too.
func smallDisk(t *testing.T, size int) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d,mode=0755", size), "tmpfs", dir).CombinedOutput(); err != nil {
		t.Fatalf("mount a %d-byte tmpfs (the full-disk row needs root): %v: %s", size, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// fill writes a file under dir until the file system has no byte left; it returns its path.
func fill(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "filler")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			break
		}
	}
	for n := 4096; n >= 1; n /= 2 { // the last pieces of a page
		for {
			if _, err := f.Write(chunk[:n]); err != nil {
				break
			}
		}
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil || st.Bavail != 0 {
		t.Fatalf("the disk under %s is not full: %d blocks free (%v)", dir, st.Bavail, err)
	}
	return p
}

// restartEngine stops the Docker engine and starts it again, as a package upgrade or a restart
// of the daemon does.
func restartEngine(t *testing.T) {
	t.Helper()
	stopEngine(t)()
}

// stopEngine stops the Docker engine of this machine — through systemd where it runs the engine
// (its socket unit too, so no call starts it again), else by signalling dockerd — and returns
// what starts it again (systemd's unit, else dockerd's own command line and log) and waits until
// it answers, once however often it is called. It needs root, as the engine does.
func stopEngine(t *testing.T) (start func()) {
	t.Helper()
	var once sync.Once
	defer func() {
		if start != nil {
			s := start
			start = func() { once.Do(s) }
		}
	}()
	wait := func() {
		for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(200 * time.Millisecond) {
			if _, err := runCmd("", nil, dockerBin, "info", "-f", "{{.ServerVersion}}"); err == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Fatal("the Docker engine did not answer within 90 s of its start")
			}
		}
	}
	if exec.Command("systemctl", "is-active", "--quiet", "docker").Run() == nil {
		if out, err := exec.Command("systemctl", "stop", "docker.socket", "docker.service").CombinedOutput(); err != nil {
			t.Fatalf("systemctl stop docker: %v: %s", err, out)
		}
		return func() {
			t.Helper()
			if out, err := exec.Command("systemctl", "start", "docker.service").CombinedOutput(); err != nil {
				t.Fatalf("systemctl start docker: %v: %s", err, out)
			}
			wait()
		}
	}
	pid, argv, logPath := dockerd(t)
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatalf("stop dockerd (pid %d; the engine rows need root): %v", pid, err)
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("dockerd (pid %d) did not stop within 60 s", pid)
		}
	}
	return func() {
		t.Helper()
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if logPath != "" {
			lf, err := os.OpenFile(logPath, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			defer lf.Close()
			cmd.Stdout, cmd.Stderr = lf, lf
		}
		if err := cmd.Start(); err != nil {
			t.Fatalf("start %v again: %v", argv, err)
		}
		go func() { _ = cmd.Wait() }() // the engine outlives the suite; this reaps it if it ends first
		wait()
	}
}

// dockerd finds the running engine: its pid, command line and the regular file it logs to ("" when
// it logs elsewhere).
func dockerd(t *testing.T) (int, []string, string) {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil || len(raw) == 0 {
			continue
		}
		argv := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
		if filepath.Base(argv[0]) != "dockerd" {
			continue
		}
		logPath, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/2", pid))
		if fi, err := os.Stat(logPath); err != nil || !fi.Mode().IsRegular() {
			logPath = ""
		}
		return pid, argv, logPath
	}
	t.Fatal("no dockerd process found: the engine-restart row restarts the engine of this machine")
	return 0, nil, ""
}

// importFat imports an image of size bytes of random data as ref (docker import: one layer of its
// own, shared with no other image), and fails the test if it cannot.
func importFat(t *testing.T, ref string, size int64) {
	t.Helper()
	dir := t.TempDir()
	data := filepath.Join(dir, "fat")
	f, err := os.Create(data)
	if err == nil {
		_, err = io.CopyN(f, rand.Reader, size)
		err = errors.Join(err, f.Close())
	}
	if err != nil {
		t.Fatal(err)
	}
	tarball := filepath.Join(dir, "fat.tar")
	if _, err := runCmd(dir, nil, "tar", "-cf", tarball, "fat"); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(data); err != nil {
		t.Fatal(err)
	}
	if _, err := runCmd("", nil, dockerBin, "import", tarball, ref); err != nil {
		t.Fatalf("docker import %s: %v", ref, err)
	}
}
