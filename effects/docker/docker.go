// Package docker runs the docker CLI's compose v2 plugin for the agent: pull, up, ps, logs,
// down, the data-root fact and image prune (PROTOCOL.md §4), and writes the agent's own
// registry credential (DOCKER_CONFIG).
//
// Compose runs the model the agent checked, alone (resolve.go): every compose call is pinned
// to `-f <deploy_dir>/resolved/<sha>.yaml` (the resolved model written at stage),
// `--env-file <deploy_dir>/resolved/empty.env`, `--project-directory <release>` and
// `-p <project>`, where <release> is the release directory with symlinks resolved (`current` →
// releases/<sha>). Before every call the release is what was verified (VerifyRelease: its
// files hash to <sha>, no symlink in its tree) and the model is the agent's own file
// (VerifyModel); otherwise the call fails with RELEASE_CHANGED and compose is not run — but a
// down, which then runs by project name alone. A release staged before models were written
// (by an older agent) is looked at (ps, logs) and removed (down) by project name alone; it is
// never pulled or started. Docker's environment is set whole by the agent:
// PATH (a fixed system path), HOME and DOCKER_CONFIG (the agent's docker directory, never a
// human's) and COMPOSE_INTERACTIVE_NO_CLI=1; nothing of the agent's own environment is
// inherited, so nothing compose or a plugin would read from it can change what runs. When the
// release is gone (a retire after a crash), compose runs by project name alone in an empty
// directory, loading no file.
//
// It may not run `compose config` (it prints resolved values) and never puts a credential in
// an error, a log or an argument. Compose's output reaches errors with its control
// characters escaped.
package docker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/internal/model"
	"github.com/tikali/monky-deployd/internal/redact"
	"github.com/tikali/monky-deployd/internal/sanitize"
	"github.com/tikali/monky-deployd/internal/vocab"
)

// Default timeouts.
const (
	DefaultTimeout      = 10 * time.Minute
	DefaultQuickTimeout = 30 * time.Second
	// MsgMax is how much of a command's output an error carries (its end).
	MsgMax = 600
)

// CLI is effects.Compose over `<Bin> compose -p <Project>`; its Model prepares what compose runs.
type CLI struct {
	Model
	Bin             string
	Project         string
	DockerConfigDir string
	// Timeout bounds pull, up, down, logs and prune; QuickTimeout bounds ps and info.
	Timeout      time.Duration
	QuickTimeout time.Duration
	// Socket is the engine's socket whose group Ready checks: DefaultSocket, the one docker
	// dials with the environment the agent gives it (a test points it elsewhere).
	Socket string
}

var _ effects.Compose = (*CLI)(nil)

// New returns a CLI with the default timeouts. dockerConfigDir is the agent's DOCKER_CONFIG
// (config.DockerConfigDir()); it is set on every command.
func New(bin, project, dockerConfigDir string) *CLI {
	if bin == "" {
		bin = "docker"
	}
	return &CLI{Bin: bin, Project: project, DockerConfigDir: dockerConfigDir,
		Timeout: DefaultTimeout, QuickTimeout: DefaultQuickTimeout, Socket: DefaultSocket}
}

// result is one finished command.
type result struct {
	stdout, stderr []byte
}

// run runs <Bin> args in dir in the environment the agent sets (env). A non-nil error is an
// *effects.Error with op and code; its Msg is the command's own meaningful output.
func (c *CLI) run(ctx context.Context, op string, code vocab.Code, dir string, timeout time.Duration, args ...string) (result, error) {
	path, err := exec.LookPath(c.Bin)
	if err != nil {
		return result{}, &effects.Error{Op: op, Kind: effects.Permanent, Code: vocab.DockerNotFound,
			Msg: c.Bin + " not found on PATH", Hint: engineSources, Err: err}
	}
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Dir = dir
	cmd.Env = c.env()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// compose starts helpers of its own: end the whole group on timeout.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	err = cmd.Run()
	res := result{stdout: stdout.Bytes(), stderr: stderr.Bytes()}
	if err == nil {
		return res, nil
	}
	msg := Meaningful(append(append([]byte{}, res.stderr...), res.stdout...))
	if ctxErr := ctx.Err(); ctxErr != nil {
		kind := effects.Temporary
		if errors.Is(ctxErr, context.DeadlineExceeded) {
			msg = joinMsg(fmt.Sprintf("timed out after %s", timeout), msg)
		} else {
			msg = joinMsg("cancelled", msg)
		}
		return res, &effects.Error{Op: op, Kind: kind, Code: code, Msg: msg, Err: ctxErr}
	}
	if msg == "" {
		msg = exitText(err) + " and printed nothing"
	}
	return res, &effects.Error{Op: op, Kind: effects.Permanent, Code: code, Msg: msg, Err: err}
}

func joinMsg(a, b string) string {
	if b == "" {
		return a
	}
	return a + " | " + b
}

func exitText(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return "exited " + strconv.Itoa(ee.ExitCode())
	}
	return err.Error()
}

// SystemPath is docker's PATH: where the system keeps docker, its plugins' helpers and the
// credential helpers. The agent's own PATH is not inherited.
const SystemPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// env is docker's whole environment: nothing of the agent's own is inherited (a variable
// there could change what compose resolves, or which plugin docker runs).
func (c *CLI) env() []string {
	return []string{"PATH=" + SystemPath, "HOME=" + c.DockerConfigDir, "DOCKER_CONFIG=" + c.DockerConfigDir,
		"COMPOSE_INTERACTIVE_NO_CLI=1"}
}

// release is what a compose call is pinned to.
type release struct {
	dir  string   // the release directory, symlinks resolved; "" when there is none
	args []string // compose's global flags, -p included
}

// pin resolves dir (a release directory or the `current` link), checks that the release and
// its resolved model are what was verified, and returns the flags that pin compose to the
// model. A release that is gone yields the project name alone; so does, for ps, logs and
// down (looksOnly), a verified release with no model (staged by an older agent). A release
// that fails the checks yields the project name alone with the check's error.
func (c *CLI) pin(op, dir string, looksOnly bool) (release, error) {
	name := release{args: []string{"compose", "-p", c.Project}}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return name, nil
		}
		return release{}, &effects.Error{Op: op, Kind: effects.Permanent, Code: vocab.ReleaseChanged, Msg: sanitize.Line(err.Error()), Err: err}
	}
	if real, err = filepath.Abs(real); err != nil {
		return release{}, err
	}
	if err := VerifyRelease(op, real); err != nil {
		return name, err
	}
	if _, err := os.Lstat(model.ModelPath(real)); errors.Is(err, os.ErrNotExist) && looksOnly {
		// a release staged before the agent wrote models: what runs is looked at (or
		// removed) by project name, loading no file; it is never pulled or started again
		return name, nil
	}
	if err := VerifyModel(op, real); err != nil {
		return name, err
	}
	return release{dir: real, args: []string{"compose", "-f", model.ModelPath(real), "--env-file", model.EmptyEnvPath(real),
		"--project-directory", real, "-p", c.Project}}, nil
}

// compose runs `compose <pinned flags> sub…` for the release in dir. A down of a release that
// fails the checks runs by project name alone (it loads no file, so nothing unverified runs)
// and says so in its error when it fails.
func (c *CLI) compose(ctx context.Context, op string, code vocab.Code, dir string, timeout time.Duration, sub ...string) (result, error) {
	r, err := c.pin(op, dir, sub[0] == "ps" || sub[0] == "logs" || sub[0] == "down")
	if err != nil && sub[0] != "down" {
		return result{}, err
	}
	wd := r.dir
	if wd == "" {
		tmp, err := os.MkdirTemp("", "monky-deployd-compose-")
		if err != nil {
			return result{}, fmt.Errorf("%s: %w", op, err)
		}
		defer os.RemoveAll(tmp)
		wd = tmp
		r.args = []string{"compose", "--project-directory", tmp, "-p", c.Project}
	}
	return c.run(ctx, op, code, wd, timeout, append(r.args, sub...)...)
}

var ansi = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\x1b\[[0-9;?]*[A-Za-z]`) })

// Meaningful turns a command's output into one line: ANSI codes and progress redraws gone,
// blank lines dropped, the rest trimmed and joined with " | ", the last MsgMax bytes kept —
// masked before the cut (redact.Tail), so that a secret the window cuts leaves no tail in clear;
// what is kept is masked again by whatever sink it reaches. The caller sanitizes it (after
// masking, so that a secret holding a control character is still recognised).
func Meaningful(out []byte) string {
	s := ansi().ReplaceAllString(string(out), "")
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		if i := strings.LastIndexByte(strings.TrimRight(l, "\r"), '\r'); i >= 0 {
			l = l[i+1:] // a progress line redrawn in place: its last state
		}
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	return redact.Tail(strings.Join(lines, " | "), MsgMax)
}

// PS is `compose ps --all --format json` in dir: every container of the project, exited and
// restarting ones too (without --all compose lists the running ones only, and a service that
// exited would read as absent, or not be missed at all).
func (c *CLI) PS(ctx context.Context, dir string) ([]effects.Container, error) {
	res, err := c.compose(ctx, "compose ps", vocab.ComposePSFailed, dir, c.QuickTimeout, "ps", "--all", "--format", "json")
	if err != nil {
		return nil, err
	}
	cs, err := ParsePS(res.stdout)
	if err != nil {
		return nil, &effects.Error{Op: "compose ps", Kind: effects.Permanent, Code: vocab.ComposePSFailed, Err: err}
	}
	return cs, nil
}

// ProjectPS is `compose ps` of the project by its name alone, in an empty directory: no release
// is read, so no release needs to be the running user's (purge runs as root over the agent's).
func (c *CLI) ProjectPS(ctx context.Context) ([]effects.Container, error) {
	tmp, err := os.MkdirTemp("", "monky-deployd-ps-")
	if err != nil {
		return nil, &effects.Error{Op: "compose ps", Kind: effects.Permanent, Code: vocab.ComposePSFailed, Err: err}
	}
	defer os.RemoveAll(tmp)
	return c.PS(ctx, filepath.Join(tmp, "no-release"))
}

// Pull is `compose pull` in dir. Idempotent. A failure carries the registry's own words and
// the typed cause they name (PullReason).
func (c *CLI) Pull(ctx context.Context, dir string) error {
	_, err := c.compose(ctx, "compose pull", vocab.ComposePullFailed, dir, c.Timeout, "pull")
	var e *effects.Error
	if errors.As(err, &e) && e.Code == vocab.ComposePullFailed && e.Reason == "" {
		e.Reason = PullReason(e.Msg)
	}
	return err
}

// pullReasons are the causes a registry's (or the resolver's, or the network's) own words name
// in compose pull's output, first match first.
var pullReasons = []struct {
	words  []string
	reason vocab.Reason
}{
	{[]string{"no basic auth credentials", "unauthorized", "denied", "authentication required"}, vocab.ReasonRegistryDenied},
	{[]string{"manifest unknown", "not found", "no such image"}, vocab.ReasonImageMissing},
	{[]string{"no such host", "server misbehaving"}, vocab.ReasonRegistryDNS},
	{[]string{"i/o timeout", "connection refused", "connection reset", "tls handshake timeout", "network is unreachable", "context deadline exceeded", "timed out", "eof"}, vocab.ReasonNetwork},
}

// PullReason is the typed cause of a failed pull, read once, here, from compose's output (the
// registry's own words): "" when none matches. Nothing after this effect reads those words.
func PullReason(out string) vocab.Reason {
	o := strings.ToLower(out)
	for _, k := range pullReasons {
		for _, w := range k.words {
			if strings.Contains(o, w) {
				return k.reason
			}
		}
	}
	return ""
}

// Up is `compose up -d --remove-orphans` in dir. Idempotent: compose converges.
func (c *CLI) Up(ctx context.Context, dir string) error {
	_, err := c.compose(ctx, "compose up", vocab.ComposeUpFailed, dir, c.Timeout, "up", "-d", "--remove-orphans")
	return err
}

// Down is `compose down --remove-orphans` (plus -v when volumes) for the release in dir, or
// by the project name alone in an empty temporary directory when the release is gone:
// compose v2 downs a project by its name. Idempotent. The caller decides volumes; it must
// never be true on prod.
func (c *CLI) Down(ctx context.Context, dir string, volumes bool) error {
	args := []string{"down", "--remove-orphans"}
	if volumes {
		args = append(args, "-v")
	}
	_, err := c.compose(ctx, "compose down", vocab.ComposeDownFailed, dir, c.Timeout, args...)
	return err
}

// Logs is `compose logs --no-color --tail <tail>` in dir. The output is raw: the caller
// redacts it before it goes anywhere.
func (c *CLI) Logs(ctx context.Context, dir string, tail int) (string, error) {
	if tail <= 0 {
		tail = 100
	}
	res, err := c.compose(ctx, "compose logs", vocab.ComposeLogsFailed, dir, c.Timeout, "logs", "--no-color", "--tail", strconv.Itoa(tail))
	if err != nil {
		return "", err
	}
	return string(res.stdout) + string(res.stderr), nil
}

// DataRoot is `docker info -f '{{.DockerRootDir}}'`.
func (c *CLI) DataRoot(ctx context.Context) (string, error) {
	res, err := c.run(ctx, "docker info", vocab.DockerInfoFailed, "", c.QuickTimeout, "info", "-f", "{{.DockerRootDir}}")
	if err != nil {
		return "", err
	}
	root := strings.TrimSpace(string(res.stdout))
	if !strings.HasPrefix(root, "/") {
		return "", &effects.Error{Op: "docker info", Kind: effects.Permanent, Code: vocab.DockerInfoFailed,
			Msg: "no data-root in the answer: " + Meaningful(res.stdout)}
	}
	return root, nil
}

// ImagePrune is `docker image prune -f`.
func (c *CLI) ImagePrune(ctx context.Context) error {
	_, err := c.run(ctx, "docker image prune", vocab.DockerPruneFailed, "", c.Timeout, "image", "prune", "-f")
	return err
}

// Images is `docker image ls`: every local image as repository:tag (untagged ones left out).
func (c *CLI) Images(ctx context.Context) ([]string, error) {
	res, err := c.run(ctx, "docker image ls", vocab.DockerPruneFailed, "", c.QuickTimeout, "image", "ls", "--format", "{{.Repository}}:{{.Tag}}")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, l := range strings.Split(string(res.stdout), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "<none>") || strings.HasSuffix(l, ":<none>") {
			continue
		}
		out = append(out, l)
	}
	return out, nil
}

// ImageSize is `docker image inspect --format {{.Size}} <ref>`: the bytes the image holds.
func (c *CLI) ImageSize(ctx context.Context, ref string) (int64, error) {
	res, err := c.run(ctx, "docker image inspect", vocab.DockerPruneFailed, "", c.QuickTimeout, "image", "inspect", "--format", "{{.Size}}", ref)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(res.stdout)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("docker image inspect %s: size %q: %w", ref, strings.TrimSpace(string(res.stdout)), err)
	}
	return n, nil
}

// RemoveImage is `docker image rm <ref>` (never -f: an image a container uses stays).
func (c *CLI) RemoveImage(ctx context.Context, ref string) error {
	_, err := c.run(ctx, "docker image rm", vocab.DockerPruneFailed, "", c.Timeout, "image", "rm", ref)
	return err
}

// Version is `docker version` and `docker compose version`, one line each, for facts.
func (c *CLI) Version(ctx context.Context) (string, error) {
	d, err := c.run(ctx, "docker version", vocab.DockerInfoFailed, "", c.QuickTimeout, "version")
	if err != nil {
		return "", err
	}
	cv, err := c.run(ctx, "docker compose version", vocab.DockerInfoFailed, "", c.QuickTimeout, "compose", "version")
	if err != nil {
		return "", err
	}
	return Meaningful(d.stdout) + "\n" + Meaningful(cv.stdout), nil
}

// engineSources and composeSources say where a box gets the docker CLI and compose v2: Debian
// 12's own archive has neither docker-compose-plugin nor docker-compose-v2 (its docker.io comes
// without compose v2), so a Debian box gets them from Docker's apt repository, or compose v2 as
// the static plugin where every docker CLI looks for its plugins.
const (
	engineSources  = "install Docker Engine with compose v2 from Docker's apt repository (download.docker.com: docker-ce docker-ce-cli docker-compose-plugin; Debian 12's docker.io has no compose v2), or set docker_bin to where the CLI is"
	composeSources = "install compose v2: docker-compose-plugin from Docker's apt repository (download.docker.com; Debian 12's archive has none), docker-compose-v2 on Ubuntu, or the static plugin from github.com/docker/compose/releases placed at /usr/libexec/docker/cli-plugins/docker-compose (mode 0755)"
)

// composeMajor finds the major version in `docker compose version`'s answer ("Docker Compose
// version v2.40.3", or "2.40.3" with --short).
var composeMajor = regexp.MustCompile(`(?:^|\s)v?(\d+)\.\d+`)

// Ready says whether this box can run compose for the agent: the docker CLI (Bin) is there, its
// compose plugin answers `docker compose version` with v2 or later (a box with compose v1 alone
// has no `docker compose`), and docker's socket lets this user in. It runs no engine call. nil
// when it can; else a permanent *effects.Error with code DOCKER_NOT_FOUND (no CLI, no compose
// v2) or DOCKER_GROUP_MISSING, its fix in Hint.
func (c *CLI) Ready(ctx context.Context) error {
	res, err := c.run(ctx, "docker compose version", vocab.DockerNotFound, "", c.QuickTimeout, "compose", "version")
	if err != nil {
		var e *effects.Error
		if errors.As(err, &e) && e.Kind == effects.Permanent && e.Code == vocab.DockerNotFound && e.Hint == "" {
			e.Msg = c.Bin + " has no compose v2 plugin: " + e.Msg
			e.Reason = vocab.ReasonComposeMissing
			e.Hint = composeSources + "; compose v1 (docker-compose) cannot be used"
		}
		return err
	}
	out := Meaningful(res.stdout)
	major := 0
	if m := composeMajor.FindStringSubmatch(out); m != nil {
		major, _ = strconv.Atoi(m[1])
	}
	if major < 2 {
		return &effects.Error{Op: "docker compose version", Kind: effects.Permanent, Code: vocab.DockerNotFound, Reason: vocab.ReasonComposeMissing,
			Msg:  "compose v2 or later is needed, " + c.Bin + " compose says: " + out,
			Hint: composeSources}
	}
	if err := CheckGroup(c.Socket); err != nil {
		return err
	}
	return c.engineUp(ctx)
}

// engineUp asks the engine itself (`docker info`, under QuickTimeout and the tick's deadline):
// the CLI and its plugin answer with the daemon stopped, and an apply that goes on would spend
// a lease and read secrets before compose pull fails with words that blame a registry. A
// daemon that does not answer is DOCKER_ENGINE_DOWN, temporary: the next tick asks again.
func (c *CLI) engineUp(ctx context.Context) error {
	_, err := c.run(ctx, "docker info", vocab.DockerEngineDown, "", c.QuickTimeout, "info", "-f", "{{.ServerVersion}}")
	var e *effects.Error
	if errors.As(err, &e) && e.Code == vocab.DockerEngineDown {
		e.Kind = effects.Temporary
		e.Msg = "the Docker engine does not answer (docker info): " + e.Msg + "; no lease was asked and no secret read"
	}
	return err
}
