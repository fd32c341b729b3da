package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/internal/testkit"
	"github.com/tikali/monky-deployd/test/e2e/registry"
	"github.com/tikali/monky-deployd/test/e2e/tools"
	"github.com/tikali/monky-deployd/test/e2e/vault"
	"github.com/tikali/monky-deployd/test/sim"
)

// projectPrefix names every compose project the suite makes; cleanup removes what carries it.
const projectPrefix = "monky-e2e-"

const wantVersion = "0.0.0-e2e"

var (
	binDir       string // monky-deployd (as the package ships it), testapp
	pluginNew    string // docker-compose plugin, composeNew
	pluginOld    string // docker-compose plugin, composeOld
	dockerBin    string // the real docker CLI
	privateCfg   string // a DOCKER_CONFIG of the suite's own (plugins only), never ~/.docker
	runID        = fmt.Sprintf("%04x", time.Now().UnixNano()&0xffff)
	registryHost string // set by the world, for cleanup
)

func TestMain(m *testing.M) { os.Exit(testMain(m)) }

func testMain(m *testing.M) int {
	fail := func(format string, args ...any) int {
		fmt.Fprintf(os.Stderr, "e2e: FAIL: "+format+"\n", args...)
		return 1
	}
	var err error
	if dockerBin, err = exec.LookPath("docker"); err != nil {
		return fail("no docker CLI on PATH: %v", err)
	}
	if out, err := runCmd("", nil, dockerBin, "info", "-f", "{{.ServerVersion}}"); err != nil {
		return fail("the Docker engine does not answer (this suite needs one): %v", err)
	} else {
		fmt.Fprintf(os.Stderr, "e2e: docker engine %s\n", strings.TrimSpace(out))
	}
	if pluginNew, err = tools.ComposePlugin(composeNew); err != nil {
		return fail("%v", err)
	}
	if pluginOld, err = tools.ComposePlugin(composeOld); err != nil {
		return fail("%v", err)
	}
	dir, err := os.MkdirTemp("", "monky-e2e-")
	if err != nil {
		return fail("%v", err)
	}
	defer os.RemoveAll(dir)
	binDir = filepath.Join(dir, "bin")
	privateCfg = filepath.Join(dir, "docker-config")
	if err := linkPlugin(privateCfg, pluginNew); err != nil {
		return fail("%v", err)
	}
	for _, p := range []string{pluginNew, pluginOld} {
		cfg := filepath.Join(dir, "probe-"+filepath.Base(filepath.Dir(p)))
		if err := linkPlugin(cfg, p); err != nil {
			return fail("%v", err)
		}
		out, err := runCmd("", []string{"DOCKER_CONFIG=" + cfg}, dockerBin, "compose", "version")
		if err != nil {
			return fail("compose plugin %s does not run: %v", p, err)
		}
		fmt.Fprintf(os.Stderr, "e2e: %s", out)
	}
	// the agent as the package ships it: make build's recipe (its failpoints are inert unless
	// MONKY_DEPLOYD_FAILPOINT names one)
	if _, err := runCmd("../..", nil, "make", "--no-print-directory", "agent", "BIN="+binDir, "VERSION="+wantVersion); err != nil {
		return fail("%v", err)
	}
	if _, err := runCmd("", []string{"CGO_ENABLED=0"}, "go", "build", "-o", filepath.Join(binDir, "testapp"), "./testapp"); err != nil {
		return fail("%v", err)
	}
	cleanupDocker("") // what an earlier, killed run left
	code := m.Run()
	if left := cleanupDocker(""); left != "" {
		fmt.Fprintf(os.Stderr, "e2e: FAIL: cleanup left: %s\n", left)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// linkPlugin makes dir a DOCKER_CONFIG whose cli-plugins/docker-compose is plugin.
func linkPlugin(dir, plugin string) error {
	pd := filepath.Join(dir, "cli-plugins")
	if err := os.MkdirAll(pd, 0o700); err != nil {
		return err
	}
	link := filepath.Join(pd, "docker-compose")
	_ = os.Remove(link)
	return os.Symlink(plugin, link)
}

// cleanupDocker removes the containers, volumes and networks of every compose project named
// monky-e2e-* (only project when set) and every image of a monky-e2e repository. It returns
// what it could not remove, "" when all is gone.
func cleanupDocker(project string) string {
	match := func(p string) bool {
		if project != "" {
			return p == project
		}
		return strings.HasPrefix(p, projectPrefix)
	}
	lines := func(args ...string) []string {
		out, _ := runCmd("", nil, dockerBin, args...)
		var r []string
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			if l = strings.TrimSpace(l); l != "" {
				r = append(r, l)
			}
		}
		return r
	}
	var left []string
	pick := func(args ...string) []string {
		var ids []string
		for _, l := range lines(args...) {
			id, p, _ := strings.Cut(l, " ")
			if match(p) {
				ids = append(ids, id)
			}
		}
		return ids
	}
	const lbl = `{{.Label "com.docker.compose.project"}}`
	if ids := pick("ps", "-a", "--format", "{{.ID}} "+lbl); len(ids) > 0 {
		if _, err := runCmd("", nil, dockerBin, append([]string{"rm", "-f", "-v"}, ids...)...); err != nil {
			left = append(left, err.Error())
		}
	}
	if ids := pick("volume", "ls", "--format", "{{.Name}} "+lbl); len(ids) > 0 {
		if _, err := runCmd("", nil, dockerBin, append([]string{"volume", "rm", "-f"}, ids...)...); err != nil {
			left = append(left, err.Error())
		}
	}
	if ids := pick("network", "ls", "--format", "{{.ID}} "+lbl); len(ids) > 0 {
		if _, err := runCmd("", nil, dockerBin, append([]string{"network", "rm"}, ids...)...); err != nil {
			left = append(left, err.Error())
		}
	}
	if project == "" {
		var imgs []string
		for _, l := range lines("image", "ls", "--format", "{{.Repository}}:{{.Tag}} {{.ID}}") {
			ref, id, _ := strings.Cut(l, " ")
			if strings.Contains(ref, "/monky-e2e/") {
				if strings.HasSuffix(ref, ":<none>") {
					imgs = append(imgs, id)
				} else {
					imgs = append(imgs, ref)
				}
			}
		}
		if len(imgs) > 0 {
			if _, err := runCmd("", nil, dockerBin, append([]string{"image", "rm", "-f"}, imgs...)...); err != nil {
				left = append(left, err.Error())
			}
		}
		for _, l := range lines("ps", "-a", "--format", lbl) {
			if match(l) {
				left = append(left, "container of "+l)
			}
		}
		for _, l := range lines("volume", "ls", "--format", "{{.Name}}") {
			if strings.HasPrefix(l, projectPrefix) {
				left = append(left, "volume "+l)
			}
		}
		for _, l := range lines("image", "ls", "--format", "{{.Repository}}") {
			if strings.Contains(l, "/monky-e2e/") {
				left = append(left, "image "+l)
			}
		}
	}
	return strings.Join(left, "; ")
}

// world is what every box shares: tenancy (the sim, checking bearers at the real Vault), the
// real Vault, the registry and the pushed images.
type world struct {
	t        *testing.T
	dir      string
	sim      *sim.Sim
	tenancy  string // http://127.0.0.1:<port>
	vault    *vault.Vault
	reg      *registry.Registry
	images   map[string]string // tag → full reference
	simLog   *bytes.Buffer
	wrongPwd string
}

func startWorld(t *testing.T) *world {
	t.Helper()
	dir := t.TempDir()
	w := &world{t: t, dir: dir, images: map[string]string{}, simLog: &bytes.Buffer{}}
	s, err := sim.New(sim.Options{})
	if err != nil {
		t.Fatalf("sim: %v", err)
	}
	w.sim = s
	srv := httptest.NewServer(s.TenancyHandler())
	t.Cleanup(srv.Close)
	w.tenancy = srv.URL
	pub, err := s.PublicKeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	w.vault = vault.Start(t, pub, dir)
	s.UseExternalBao(&sim.ExternalBao{Addr: w.vault.Addr, Token: w.vault.TenancyToken, Client: w.vault.HTTPClient()})

	regLog, err := os.Create(filepath.Join(dir, "registry.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { regLog.Close() })
	w.reg = registry.Start(t, "deployer", "pw-"+runID+"-e2e-registry", regLog)
	registryHost = w.reg.Host
	w.wrongPwd = "not-the-password-" + runID
	for _, tag := range []string{"1", "2", "3"} {
		ref, err := w.reg.Push(filepath.Join(binDir, "testapp"), registry.Image{Repo: "monky-e2e/app", Tag: tag,
			Env: []string{"APP_VERSION=" + tag}})
		if err != nil {
			t.Fatalf("push: %v", err)
		}
		w.images[tag] = ref
	}
	return w
}

// seedSecrets writes an env's secrets into the real Vault: gemini in three versions (the
// releases pin 2), db, and the registry credential (use: registry-auth).
func (w *world) seedSecrets(envID string) {
	w.t.Helper()
	for i := 1; i <= 3; i++ {
		w.vault.Put(w.t, envID, "gemini", map[string]any{"value": fmt.Sprintf("gemini-%s-v%d-%s", envID, i, runID)})
	}
	w.vault.Put(w.t, envID, "db", map[string]any{"password": dbPassword(envID)})
	w.setRegistryPassword(envID, w.reg.Password)
}

func dbPassword(envID string) string { return "db-pw-" + envID + "-" + runID + "-Zq9" }

func geminiPinned(envID string) string { return fmt.Sprintf("gemini-%s-v2-%s", envID, runID) }

func (w *world) setRegistryPassword(envID, pw string) {
	w.t.Helper()
	cred, _ := json.Marshal(map[string]string{"registry": w.reg.Host, "username": w.reg.User, "password": pw})
	w.vault.Put(w.t, envID, "registry", map[string]any{"value": string(cred)})
}

// rel describes a release of the two-service test backend.
type rel struct {
	tag       string // image tag: 1, 2, 3
	unhealthy bool   // api answers its health check 500 and prints DB_PASSWORD
	otherEnv  string // when set, the manifest also reads db of that env (refused locally)
	note      string // changes the bundle's bytes (and so its sha)
	override  string // when set, the bundle also holds a compose.override.yaml that makes api run this tag, privileged
	tricky    bool   // the manifest also reads the tricky secrets (quotes, $, #, backslashes) into TRICKY_*
	// compose, when set, is the bundle's compose.yaml instead of the two services' (it is
	// given the image of tag); files are more files of the bundle.
	compose func(img string) string
	files   map[string]string
}

// trickySecrets are secret values .env must carry to the container unchanged.
var trickySecrets = map[string]string{
	"TRICKY_A": `'leading quote' COMPOSE_FILE=evil.yaml # not a comment`,
	"TRICKY_B": `"double" $HOME ${X} $$ back\slash\n 'single'`,
	"TRICKY_C": `#hash first, backslash last\`,
}

func (w *world) files(envID string, r rel) map[string][]byte {
	img := w.images[r.tag]
	unhealthy := "0"
	if r.unhealthy {
		unhealthy = "1"
	}
	compose := fmt.Sprintf(`# e2e release %s %s
services:
  api:
    image: %s
    env_file: .env
    environment:
      ROLE: api
      UNHEALTHY: "%s"
  worker:
    image: %s
    env_file: .env
    environment:
      ROLE: worker
      LISTEN: ":8081"
    healthcheck:
      test: ["CMD", "/app", "-health"]
      interval: 1s
      timeout: 2s
      retries: 3
    volumes:
      - worker-data:/data
volumes:
  worker-data: {}
`, r.tag, r.note, img, unhealthy, img)
	p := func(name string) string { return "monky/data/" + envID + "/see/" + name }
	entries := []map[string]any{
		{"var": "GEMINI_API_KEY", "path": p("gemini"), "key": "value", "version": 2},
		{"var": "DB_PASSWORD", "path": p("db"), "key": "password"},
		{"use": "registry-auth", "path": p("registry"), "key": "value"},
	}
	if r.otherEnv != "" {
		entries = append(entries, map[string]any{"var": "OTHER_DB", "path": "monky/data/" + r.otherEnv + "/see/db", "key": "password"})
	}
	tpl := "APP_RELEASE=" + r.tag + "\nGEMINI_API_KEY=${GEMINI_API_KEY}\nDB_PASSWORD=${DB_PASSWORD}\n"
	if r.tricky {
		for _, k := range []string{"TRICKY_A", "TRICKY_B", "TRICKY_C"} {
			entries = append(entries, map[string]any{"var": k, "path": p("tricky"), "key": strings.ToLower(k)})
		}
		// a reference first in a value followed by a comment, one in double quotes, one in single
		tpl += "TRICKY_A=${TRICKY_A} # the value is the secret alone\nTRICKY_B=\"${TRICKY_B}\"\nTRICKY_C='${TRICKY_C}'\n"
	}
	manifest, _ := json.Marshal(map[string]any{"entries": entries})
	out := map[string][]byte{
		"compose.yaml":          []byte(compose),
		".env.template":         []byte(tpl),
		"bundle.json":           []byte(`{"agent": {"allow_privileged": false, "allow_rollback": false}, "disk_need_bytes": 1048576}`),
		"secrets.manifest.json": manifest,
	}
	if r.compose != nil {
		out["compose.yaml"] = []byte(fmt.Sprintf("# e2e release %s %s\n", r.tag, r.note) + r.compose(img))
	}
	for n, body := range r.files {
		out[n] = []byte(body)
	}
	if r.override != "" {
		out["compose.override.yaml"] = []byte(fmt.Sprintf("services:\n  api:\n    image: %s\n    privileged: true\n", w.images[r.override]))
	}
	return out
}

// desire adds release name for envID and makes it the desired one; it returns its sha.
func (w *world) desire(envID, name string, r rel) string {
	w.t.Helper()
	if _, err := w.sim.AddRelease(envID, name, w.files(envID, r)); err != nil {
		w.t.Fatal(err)
	}
	sha, err := w.sim.SetDesiredRelease(envID, name)
	if err != nil {
		w.t.Fatal(err)
	}
	return sha
}

// box is one install on this machine: its config, state and deploy dirs, compose project.
type box struct {
	t         *testing.T
	w         *world
	env       string
	dir       string
	cfg       string
	stateDir  string
	deployDir string
	project   string
	grant     string // the bootstrap grant as the kit wrote it
	outputs   []string
}

// newBox writes an install kit for envID as the installer would: config.yaml (the real
// Vault's address and CA, the real docker, a monky-e2e-* project) and bootstrap.jwt (0600).
// The compose plugin is placed under the agent's own DOCKER_CONFIG (<state_dir>/docker), the
// only plugin directory the docker CLI searches besides the system ones.
func (w *world) newBox(t *testing.T, envID string) *box {
	t.Helper()
	return w.newBoxIn(t, envID, t.TempDir())
}

// newBoxIn is newBox with the box's files (kit, config, state and deploy dirs) under dir.
func (w *world) newBoxIn(t *testing.T, envID, dir string) *box {
	t.Helper()
	short := strings.ReplaceAll(strings.TrimPrefix(envID, "env-"), "-", "")
	b := &box{t: t, w: w, env: envID, dir: dir, cfg: filepath.Join(dir, "config.yaml"),
		stateDir: filepath.Join(dir, "state"), deployDir: filepath.Join(dir, "deploy"),
		project: projectPrefix + short + "-" + runID}
	t.Cleanup(func() {
		if left := cleanupDocker(b.project); left != "" {
			t.Errorf("cleanup of %s: %s", b.project, left)
		}
	})
	grant, err := w.sim.RevealKit(envID)
	if err != nil {
		t.Fatal(err)
	}
	b.grant = grant
	testkit.WriteFile(t, filepath.Join(dir, "bootstrap.jwt"), grant+"\n", 0o600)
	cfg := fmt.Sprintf(`env_id: %q
site: e2e
transport: system
tenancy:
  base_url: %q
bao:
  addr: %q
  auth_mount: %q
  role: %q
  kv_mount: %q
  ca_file: %q
bootstrap_path: %q
state_dir: %q
deploy_dir: %q
docker_bin: %q
compose_project: %q
healthy_timeout_s: 20
keep_releases: 2
log_level: INFO
`, envID, w.tenancy, w.vault.Addr, vault.AuthMount, vault.Role, vault.KVMount, w.vault.CAFile,
		filepath.Join(dir, "bootstrap.jwt"), b.stateDir, b.deployDir, dockerBin, b.project)
	testkit.WriteFile(t, b.cfg, cfg, 0o640)
	b.usePlugin(pluginNew)
	return b
}

// usePlugin points the agent's DOCKER_CONFIG/cli-plugins/docker-compose at plugin.
func (b *box) usePlugin(plugin string) {
	b.t.Helper()
	if err := linkPlugin(filepath.Join(b.stateDir, "docker"), plugin); err != nil {
		b.t.Fatal(err)
	}
}

// runAgent runs bin (monky-deployd) with the box's config.
func (b *box) runAgent(bin string, env []string, args ...string) (stdout, stderr string, code int, sig syscall.Signal) {
	b.t.Helper()
	cmd := exec.Command(filepath.Join(binDir, bin), append([]string{"--config", b.cfg}, args...)...)
	cmd.Env = append(os.Environ(), "NO_COLOR=1", "MONKY_DEPLOYD_CONFIG=", "MONKY_DEPLOYD_FAILPOINT=", "DOCKER_CONFIG=", "DOCKER_HOST=")
	cmd.Env = append(cmd.Env, env...)
	r, err := testkit.Exec(cmd, -1)
	b.outputs = append(b.outputs, r.Stdout, r.Stderr)
	if err != nil {
		b.t.Fatalf("%s %v: %v", bin, args, err)
	}
	return r.Stdout, r.Stderr, r.Code, r.Sig
}

// tick runs `run --once` (plus extra args) as the timer does and fails the test unless it exits
// with want.
func (b *box) tick(want int, extra ...string) string {
	b.t.Helper()
	start := time.Now()
	_, e, c, _ := b.runAgent("monky-deployd", nil, append([]string{"run", "--once"}, extra...)...)
	b.t.Logf("%s: run --once %v: exit %d in %v", b.env, extra, c, time.Since(start).Round(time.Millisecond))
	if c != want {
		b.t.Fatalf("%s: run --once exit %d, want %d; stderr:\n%s", b.env, c, want, e)
	}
	return e
}

func (b *box) reports() []effects.Report { return b.w.sim.Reports(b.env) }

func (b *box) lastReport() effects.Report {
	b.t.Helper()
	rs := b.reports()
	if len(rs) == 0 {
		b.t.Fatalf("%s: tenancy holds no report", b.env)
	}
	return rs[len(rs)-1]
}

// retire retires the box's env with its volumes purged and runs the tick that takes it down:
// tenancy must hold a down report, and docker no container of the project.
func (b *box) retire() {
	b.t.Helper()
	if err := b.w.sim.Retire(b.env, true); err != nil {
		b.t.Fatal(err)
	}
	b.tick(0)
	if r := b.lastReport(); r.Result != effects.ResultDown {
		b.t.Errorf("report %s (%s), want down", r.Result, r.Detail)
	}
	if cs := b.containers(); len(cs) != 0 {
		b.t.Errorf("containers left after a retire: %v", keys(cs))
	}
}

// container is what `docker inspect` says of one container.
type container struct {
	ID           string `json:"Id"`
	Name         string
	Image        string // image id
	RestartCount int    // the engine's restarts of this container (its restart policy)
	Config       struct {
		Image  string
		Labels map[string]string
		Env    []string
	}
	HostConfig struct {
		Privileged bool
	}
	Mounts []struct {
		Type, Name, Source, Destination string
		RW                              bool
	}
	State struct {
		Status    string
		ExitCode  int
		OOMKilled bool
		Health    *struct{ Status string }
	}
}

func (c container) service() string { return c.Config.Labels["com.docker.compose.service"] }

func (c container) health() string {
	if c.State.Health == nil {
		return ""
	}
	return c.State.Health.Status
}

// containers asks docker itself for the box's project containers, by service.
func (b *box) containers() map[string]container {
	b.t.Helper()
	out, err := runCmd("", nil, dockerBin, "ps", "-a", "-q", "--filter", "label=com.docker.compose.project="+b.project)
	if err != nil {
		b.t.Fatal(err)
	}
	ids := strings.Fields(out)
	m := map[string]container{}
	if len(ids) == 0 {
		return m
	}
	raw, err := runCmd("", nil, dockerBin, append([]string{"inspect"}, ids...)...)
	if err != nil {
		b.t.Fatal(err)
	}
	var cs []container
	if err := json.Unmarshal([]byte(raw), &cs); err != nil {
		b.t.Fatalf("docker inspect: %v", err)
	}
	for _, c := range cs {
		m[c.service()] = c
	}
	return m
}

// assertHealthy: api and worker run the image of tag and docker says both are healthy.
func (b *box) assertHealthy(tag string) {
	b.t.Helper()
	cs := b.containers()
	if len(cs) != 2 {
		b.t.Errorf("%s: %d containers, want api and worker: %v", b.project, len(cs), keys(cs))
	}
	for _, svc := range []string{"api", "worker"} {
		c, ok := cs[svc]
		if !ok {
			b.t.Errorf("%s: no %s container", b.project, svc)
			continue
		}
		if c.State.Status != "running" || c.health() != "healthy" {
			b.t.Errorf("%s/%s: status %q health %q, want running healthy", b.project, svc, c.State.Status, c.health())
		}
		if want := b.w.images[tag]; c.Config.Image != want {
			b.t.Errorf("%s/%s runs %s, want %s", b.project, svc, c.Config.Image, want)
		}
	}
}

// refusedBeforeLease runs a tick that must refuse the desired release as PRIVILEGED_REFUSED
// naming want, before any lease and with no container of the project replaced.
func (b *box) refusedBeforeLease(want string) {
	b.t.Helper()
	leases := b.w.sim.Counts(b.env).Leases
	before := b.containers()
	e := b.tick(1)
	if !strings.Contains(e, "PRIVILEGED_REFUSED") || !strings.Contains(e, want) {
		b.t.Errorf("stderr does not refuse the release naming %q:\n%s", want, e)
	}
	if n := b.w.sim.Counts(b.env).Leases; n != leases {
		b.t.Errorf("leases %d → %d: the refusal cost a lease", leases, n)
	}
	b.sameContainers(before, "by a refused release")
}

// sameContainers fails the test when a container of before is no longer the project's (why
// says what replaced it).
func (b *box) sameContainers(before map[string]container, why string) {
	b.t.Helper()
	after := b.containers()
	for svc, c := range before {
		if after[svc].ID != c.ID {
			b.t.Errorf("%s was replaced %s", svc, why)
		}
	}
}

// exec runs the test image's program in the running container of service svc (as a
// compromised service would run it) and returns what it printed and its error.
func (b *box) exec(svc string, args ...string) (string, error) {
	b.t.Helper()
	c, ok := b.containers()[svc]
	if !ok {
		b.t.Fatalf("%s: no %s container to exec in", b.project, svc)
	}
	return runCmd("", nil, dockerBin, append([]string{"exec", c.ID, "/app"}, args...)...)
}

// release is the directory of release sha on the box.
func (b *box) release(sha string) string { return filepath.Join(b.deployDir, "releases", sha) }

func keys[V any](m map[string]V) []string {
	var r []string
	for k := range m {
		r = append(r, k)
	}
	return r
}

// volumeExists reports whether the project's named volume is still there.
func (b *box) volumeExists(name string) bool {
	_, err := runCmd("", nil, dockerBin, "volume", "inspect", b.project+"_"+name)
	return err == nil
}

// checkin posts a check-in to tenancy with bearer and returns the status and body.
func (w *world) checkin(envID, bearer string) (int, string) {
	w.t.Helper()
	body, _ := json.Marshal(effects.CheckinRequest{EnvID: envID})
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, w.tenancy+"/v1/agent/checkin", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+bearer)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		w.t.Fatal(err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	return resp.StatusCode, buf.String()
}

func (b *box) token() string {
	b.t.Helper()
	raw, err := os.ReadFile(filepath.Join(b.stateDir, "bao.token"))
	if err != nil {
		b.t.Fatalf("bao.token: %v", err)
	}
	return strings.TrimSpace(string(raw))
}
