package model

import (
	"strings"
	"testing"

	"github.com/tikali/monky-deployd/internal/bundle"
	"github.com/tikali/monky-deployd/internal/testkit"
	"github.com/tikali/monky-deployd/internal/vocab"
)

const env = "env-qa-02"

func readBundle(t *testing.T, es ...testkit.TarEntry) *bundle.Bundle {
	t.Helper()
	b, err := bundle.Read(testkit.Tar(t, es...), 1<<20)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	return b
}

// build makes a bundle from compose, template and manifest (empty: absent), with meta extras.
func build(t *testing.T, envID, compose, tpl, manifest string, extra map[string]any) *bundle.Bundle {
	t.Helper()
	names := []string{"compose.yaml"}
	es := []testkit.TarEntry{testkit.TarFile("compose.yaml", compose)}
	if tpl != "" {
		names = append(names, bundle.TemplateFile)
		es = append(es, testkit.TarFile(bundle.TemplateFile, tpl))
	}
	if manifest != "" {
		names = append(names, bundle.ManifestFile)
		es = append(es, testkit.TarFile(bundle.ManifestFile, manifest))
	}
	es = append([]testkit.TarEntry{testkit.TarFile("bundle.json", testkit.BundleMeta(envID, extra, names...))}, es...)
	return readBundle(t, es...)
}

const goodManifest = `{"entries": [
  {"var": "GEMINI_API_KEY", "path": "monky/data/env-qa-02/see/gemini", "key": "value", "version": 3},
  {"use": "registry-auth", "path": "monky/data/env-qa-02/see/registry", "version": 1}]}`

const goodTemplate = "# substitutes every ${VAR} from OpenBao\nGEMINI_API_KEY=${GEMINI_API_KEY}\nLITERAL=$${NOT_A_VAR}\n"

func TestCheckAccepts(t *testing.T) {
	b := build(t, env, okCompose, goodTemplate, goodManifest, nil)
	if r := Check(b, CheckInput{DesiredSha: b.Sha, EnvID: env, KVMount: "monky"}); r != nil {
		t.Fatalf("Check refused a good bundle: %v", r)
	}
	// The mount defaults to monky.
	if r := Check(b, CheckInput{DesiredSha: b.Sha, EnvID: env}); r != nil {
		t.Fatalf("Check refused with the default mount: %v", r)
	}
	// Shas compare byte for byte: the same sha in upper case is another sha.
	if r := Check(b, CheckInput{DesiredSha: strings.ToUpper(b.Sha), EnvID: env}); r == nil || r.Code != vocab.BundleShaMismatch {
		t.Fatalf("an upper-case desired sha: got %v, want %s", r, vocab.BundleShaMismatch)
	}
}

func TestCheckEachCode(t *testing.T) {
	const priv = "services:\n  api:\n    image: x\n    privileged: true\n"
	cases := []struct {
		name       string
		envID      string
		compose    string
		tpl, man   string
		desired    string // "" = the bundle's sha
		mount      string
		wantCode   vocab.Code
		wantDetail string
	}{
		{name: "manifest bad version", envID: env, compose: okCompose, man: `{"entries":[{"var":"A","path":"monky/data/env-qa-02/see/a","version":0}]}`,
			wantCode: vocab.BundleInvalid, wantDetail: "version must be ≥ 1"},
		{name: "manifest var and use", envID: env, compose: okCompose, man: `{"entries":[{"var":"A","use":"registry-auth","path":"monky/data/env-qa-02/see/a"}]}`,
			wantCode: vocab.BundleInvalid, wantDetail: "needs either var or use"},
		{name: "manifest neither", envID: env, compose: okCompose, man: `{"entries":[{"path":"monky/data/env-qa-02/see/a"}]}`,
			wantCode: vocab.BundleInvalid, wantDetail: "needs either var or use"},
		{name: "compose unparsable", envID: env, compose: "services: [\n  - : :\n", wantCode: vocab.BundleInvalid, wantDetail: "compose.yaml does not load: failed to parse compose.yaml"},
		{name: "sha mismatch", envID: env, compose: okCompose, desired: strings.Repeat("ab", 32),
			wantCode: vocab.BundleShaMismatch, wantDetail: "≠ desired abababababab"},
		{name: "env mismatch", envID: "env-qa-03", compose: okCompose, wantCode: vocab.BundleEnvMismatch, wantDetail: "env-qa-03"},
		{name: "env incomplete", envID: env, compose: okCompose, tpl: "B=${ZED}\nA=${ALPHA}\n# ${COMMENTED}\nC=${ALPHA}\n",
			wantCode: vocab.EnvIncomplete, wantDetail: "unresolved: ALPHA, ZED"},
		{name: "manifest path other env", envID: env, compose: okCompose,
			man:      `{"entries":[{"var":"A","path":"monky/data/env-qa-01/see/a"}]}`,
			wantCode: vocab.ManifestPathRefused, wantDetail: "entry A: path monky/data/env-qa-01/see/a is not under monky/data/env-qa-02/see/"},
		{name: "manifest path dotdot", envID: env, compose: okCompose,
			man:      `{"entries":[{"var":"A","path":"monky/data/env-qa-02/see/../../env-qa-01/see/a"}]}`,
			wantCode: vocab.ManifestPathRefused, wantDetail: "has a .. segment"},
		{name: "manifest path empty", envID: env, compose: okCompose,
			man:      `{"entries":[{"use":"registry-auth"}]}`,
			wantCode: vocab.ManifestPathRefused, wantDetail: "entry registry-auth: has no path"},
		{name: "manifest path bare prefix", envID: env, compose: okCompose,
			man:      `{"entries":[{"var":"A","path":"monky/data/env-qa-02/see/"}]}`,
			wantCode: vocab.ManifestPathRefused, wantDetail: "does not name an entry"},
		{name: "manifest path other mount", envID: env, compose: okCompose, mount: "kv",
			man:      `{"entries":[{"var":"A","path":"monky/data/env-qa-02/see/a"}]}`,
			wantCode: vocab.ManifestPathRefused, wantDetail: "not under kv/data/env-qa-02/see/"},
		{name: "privileged", envID: env, compose: priv, wantCode: vocab.PrivilegedRefused, wantDetail: "service api: privileged: true"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := build(t, c.envID, c.compose, c.tpl, c.man, nil)
			desired := c.desired
			if desired == "" {
				desired = b.Sha
			}
			r := Check(b, CheckInput{DesiredSha: desired, EnvID: env, KVMount: c.mount})
			if r == nil || r.Code != c.wantCode {
				t.Fatalf("got %v, want %s", r, c.wantCode)
			}
			if !strings.Contains(r.Detail, c.wantDetail) {
				t.Errorf("detail %q does not hold %q", r.Detail, c.wantDetail)
			}
			if !strings.HasPrefix(r.Error(), string(c.wantCode)+": ") {
				t.Errorf("Error() = %q", r.Error())
			}
		})
	}
}

// Each pair of faults is refused with the earlier code of PROTOCOL.md's order.
func TestCheckOrder(t *testing.T) {
	const priv = "services:\n  api:\n    image: x\n    network_mode: host\n"
	const badPath = `{"entries":[{"var":"A","path":"secret/other"}]}`
	const badVersion = `{"entries":[{"var":"A","path":"monky/data/env-qa-02/see/a","version":-1}]}`
	wrongSha := strings.Repeat("0", 64)
	cases := []struct {
		name              string
		bundleEnv         string
		compose, tpl, man string
		wrongSha          bool
		want              vocab.Code
	}{
		{"invalid before sha", env, okCompose, "", badVersion, true, vocab.BundleInvalid},
		{"sha before env", "env-qa-09", okCompose, "", "", true, vocab.BundleShaMismatch},
		{"env before incomplete", "env-qa-09", okCompose, "X=${MISSING}\n", "", false, vocab.BundleEnvMismatch},
		{"incomplete before path", env, okCompose, "X=${MISSING}\n", badPath, false, vocab.EnvIncomplete},
		{"path before privileged", env, priv, "", badPath, false, vocab.ManifestPathRefused},
		{"all of them", "env-qa-09", priv, "X=${MISSING}\n", badPath, true, vocab.BundleShaMismatch},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := build(t, c.bundleEnv, c.compose, c.tpl, c.man, nil)
			desired := b.Sha
			if c.wrongSha {
				desired = wrongSha
			}
			r := Check(b, CheckInput{DesiredSha: desired, EnvID: env, KVMount: "monky"})
			if r == nil || r.Code != c.want {
				t.Fatalf("got %v, want %s", r, c.want)
			}
		})
	}
}

func TestCheckAllowPrivileged(t *testing.T) {
	const priv = "services:\n  api:\n    image: x\n    privileged: true\n"
	b := build(t, env, priv, "", "", map[string]any{"agent": map[string]any{"allow_privileged": true}})
	if r := Check(b, CheckInput{DesiredSha: b.Sha, EnvID: env}); r != nil {
		t.Fatalf("allow_privileged bundle refused: %v", r)
	}
}
