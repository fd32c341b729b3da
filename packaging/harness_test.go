package packaging

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/tikali/monky-deployd/internal/testkit"
)

// realTools are linked into the sandbox's PATH as themselves; everything else a script calls is a
// recording shim, so a test sees every call and nothing touches the machine.
var realTools = []string{
	"sh", "bash", "cat", "mkdir", "mv", "rm", "rmdir", "chmod", "awk", "sed", "mktemp", "dirname",
	"basename", "sha256sum", "sync", "cp", "stat", "tr", "head", "env", "grep", "date", "gzip", "ls", "sort",
}

// shimBodies are the behaviours of the stand-ins. Every shim first appends one line to $SHIM_LOG:
// its name and its arguments, tab-separated.
var shimBodies = map[string]string{
	"getent":   `case " $(cat "$SHIM_STATE/getent" 2>/dev/null) " in *" $1:$2 "*) echo "$2:x:1:"; exit 0;; esac; exit 2`,
	"groupadd": `for a in "$@"; do last=$a; done; printf ' group:%s ' "$last" >> "$SHIM_STATE/getent"`,
	"useradd":  `for a in "$@"; do last=$a; done; printf ' passwd:%s ' "$last" >> "$SHIM_STATE/getent"`,
	"systemctl": `if [ -n "${SHIM_SYSTEMCTL_FAIL:-}" ]; then case "$*" in $SHIM_SYSTEMCTL_FAIL) exit 1;; esac; fi
case "$1" in
  enable) printf '%s\n' "$@" | grep -v -e '^enable$' -e '^--now$' >> "$SHIM_STATE/enabled" ;;
  disable) for a in "$@"; do grep -v -x -e "$a" "$SHIM_STATE/enabled" > "$SHIM_STATE/e.tmp" 2>/dev/null; mv "$SHIM_STATE/e.tmp" "$SHIM_STATE/enabled"; done ;;
  is-enabled) for a in "$@"; do last=$a; done; grep -q -x -e "$last" "$SHIM_STATE/enabled" 2>/dev/null; exit $? ;;
esac
exit 0`,
	// install/chown: the monky-deployd user does not exist here; modes are kept, owners dropped
	"install": `n=$#; i=0
while [ $i -lt $n ]; do a=$1; shift; i=$((i+1)); case $a in -o|-g) shift; i=$((i+1));; *) set -- "$@" "$a";; esac; done
exec "$REAL_BIN/install" "$@"`,
	"chown": `exit 0`,
	"id":    `[ "$1" = -u ] && echo 0; exit 0`,
	"curl": `out=""; cfg=""; url=""
while [ $# -gt 0 ]; do case $1 in -o) out=$2; shift 2;; -K) cfg=$2; shift 2;; --retry) shift 2;; -*) shift;; *) url=$1; shift;; esac; done
if [ -n "$cfg" ]; then { stat -c 'mode=%a' "$cfg"; cat "$cfg"; } >> "$SHIM_STATE/curlcfg"; fi
case $url in
  *.deb) printf 'FAKEDEB' > "$out" ;;
  *.sha256) printf '%s  x.deb\n' "$SHIM_DEB_SHA" > "$out" ;;
  *) printf 'KEY' > "$out" ;;
esac`,
	"apt-get":          `if [ -n "${SHIM_APT_FAIL:-}" ]; then case "$*" in *$SHIM_APT_FAIL*) exit 100;; esac; fi; exit 0`,
	"ziti-edge-tunnel": `if [ "$1" = enroll ]; then while [ $# -gt 0 ]; do [ "$1" = --identity ] && printf '{"ztAPI":"https://ctrl.example"}' > "$2"; shift; done; fi`,
	"docker":           `exit 0`,
	// dpkg --compare-versions A lt B as dpkg orders them (sort -V puts 1.0.0~x before 1.0.0)
	"dpkg": `if [ "$1" = --compare-versions ]; then
  [ "$3" = lt ] || exit 2
  [ "$2" != "$4" ] && [ "$(printf '%s\n%s\n' "$2" "$4" | sort -V | head -n 1)" = "$2" ]; exit $?
fi
exit 0`,
	"setfacl": `exit 0`,
	"usermod": `exit 0`,
	"ziti":    `exit 0`,
	"gpg":     `exit 1`,
	// the installed package's binary: `version --json` names its transports (SHIM_SDK=1: a build
	// with the OpenZiti SDK)
	"monky-deployd": `if [ "$1" = check ]; then if [ -n "${SHIM_CHECK_FAIL:-}" ]; then echo "config $3: line 3: $SHIM_CHECK_FAIL"; exit 1; fi; echo "config $3: ok"; exit 0; fi
if [ "${SHIM_SDK:-}" = 1 ]; then t='"sdk", "proxy", "system"'; d=sdk; else t='"proxy", "system"'; d=system; fi
printf '{\n  "version": "1.0.0",\n  "transports": [\n    %s\n  ],\n  "default_transport": "%s"\n}\n' "$t" "$d"`,
}

// sandbox is one temporary system: a root prefix, a PATH of shims and a log of every call.
type sandbox struct {
	t     *testing.T
	dir   string
	Root  string
	bin   string
	state string
	log   string
	env   []string
}

func newSandbox(t *testing.T, without ...string) *sandbox {
	t.Helper()
	dir := t.TempDir()
	s := &sandbox{t: t, dir: dir, Root: filepath.Join(dir, "root"), bin: filepath.Join(dir, "bin"),
		state: filepath.Join(dir, "state"), log: filepath.Join(dir, "calls.log")}
	real := filepath.Join(dir, "real")
	for _, d := range []string{s.Root, s.bin, s.state, real, filepath.Join(dir, "tmp")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, tool := range append(append([]string{}, realTools...), "install") {
		p, err := exec.LookPath(tool)
		if err != nil {
			t.Fatalf("%s is needed on PATH for the packaging tests: %v", tool, err)
		}
		dst := filepath.Join(real, tool)
		if tool == "install" {
			dst = filepath.Join(real, "install")
		}
		if err := os.Symlink(p, dst); err != nil {
			t.Fatal(err)
		}
	}
	skip := map[string]bool{}
	for _, w := range without {
		skip[w] = true
	}
	for name, body := range shimBodies {
		if skip[name] {
			continue
		}
		script := "#!/bin/sh\n{ printf '%s' \"${0##*/}\"; for a in \"$@\"; do printf '\\t%s' \"$a\"; done; printf '\\n'; } >> \"$SHIM_LOG\"\n" + body + "\n"
		if err := os.WriteFile(filepath.Join(s.bin, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// real tools that are shims too (install) sit behind the shim dir on PATH
	s.env = []string{
		"PATH=" + s.bin + ":" + real,
		"SHIM_LOG=" + s.log,
		"SHIM_STATE=" + s.state,
		"REAL_BIN=" + real,
		"TMPDIR=" + filepath.Join(dir, "tmp"),
		"HOME=" + dir,
		"LC_ALL=C",
	}
	return s
}

// known makes getent answer for the given "group:NAME" / "passwd:NAME" entries.
func (s *sandbox) known(entries ...string) {
	s.t.Helper()
	f, err := os.OpenFile(filepath.Join(s.state, "getent"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		s.t.Fatal(err)
	}
	defer f.Close()
	for _, e := range entries {
		if _, err := f.WriteString(" " + e + " "); err != nil {
			s.t.Fatal(err)
		}
	}
}

// run executes a command in the sandbox and returns its exit code, stdout+stderr.
func (s *sandbox) run(stdin []byte, extraEnv []string, name string, args ...string) (int, string) {
	s.t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(append([]string{}, s.env...), extraEnv...)
	cmd.Dir = s.dir
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		s.t.Fatalf("%s: %v", name, err)
	}
	return code, out.String()
}

// calls returns the recorded calls, one string per call ("name arg arg"), with the sandbox's
// root and directory replaced by <ROOT> and <DIR>, and clears the log.
func (s *sandbox) calls() []string {
	s.t.Helper()
	b, err := os.ReadFile(s.log)
	if os.IsNotExist(err) {
		return nil
	} else if err != nil {
		s.t.Fatal(err)
	}
	_ = os.Remove(s.log)
	var out []string
	for _, line := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		if line == "" {
			continue
		}
		line = strings.ReplaceAll(line, "\t", " ")
		line = strings.ReplaceAll(line, s.Root, "<ROOT>")
		line = strings.ReplaceAll(line, s.dir, "<DIR>")
		out = append(out, line)
	}
	return out
}

// rawLog is the unredacted call log (for scanning argv for secrets).
func (s *sandbox) rawLog() string {
	b, _ := os.ReadFile(s.log)
	return string(b)
}

func (s *sandbox) enabled() []string {
	b, _ := os.ReadFile(filepath.Join(s.state, "enabled"))
	set := map[string]bool{}
	for _, l := range strings.Fields(string(b)) {
		set[l] = true
	}
	var out []string
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func (s *sandbox) path(rel string) string { return filepath.Join(s.Root, rel) }

// wantModes fails the test for each path (relative to the sandbox's root) whose mode is not
// the one given.
func (s *sandbox) wantModes(t *testing.T, modes map[string]os.FileMode) {
	t.Helper()
	paths := make([]string, 0, len(modes))
	for p := range modes {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		if m := testkit.Mode(t, s.path(p)); m != modes[p] {
			t.Errorf("/%s mode %o, want %o", p, m, modes[p])
		}
	}
}

// needTool returns the tool's path; without it the test is skipped (and `make test` names it),
// except under MONKY_REQUIRE_TOOLS=1, where its absence is a failure (.ci/run installs it).
func needTool(t *testing.T, name, pkg string) string {
	t.Helper()
	p := testkit.Tool(t, name, pkg, t.Name())
	if p == "" {
		t.SkipNow()
	}
	return p
}

func equalCalls(t *testing.T, label string, got, want []string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("%s: calls differ\n got:\n  %s\nwant:\n  %s", label, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}
