package model

import (
	"reflect"
	"testing"

	"github.com/tikali/monky-deployd/internal/bundle"
	"github.com/tikali/monky-deployd/internal/testkit"

	"github.com/tikali/monky-deployd/internal/sanitize"
	"github.com/tikali/monky-deployd/internal/vocab"
)

func FuzzPrivileged(f *testing.F) {
	for _, s := range []string{okCompose, "services:\n  a:\n    privileged: true\n    volumes: [\"/:/host\"]\n",
		"services:\n  a:\n    volumes:\n      - type: bind\n        source: /var/run/docker.sock\n", "services: [", "&a [*a, *a]"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, compose []byte) {
		bun := &bundle.Bundle{Files: map[string][]byte{bundle.DefaultComposeFile: compose}, Meta: bundle.Meta{EnvID: env, ComposeFile: bundle.DefaultComposeFile}}
		a, errA := PrivilegedFindings(bun, ComposeEnv{})
		b, errB := PrivilegedFindings(bun, ComposeEnv{})
		if (errA == nil) != (errB == nil) || !reflect.DeepEqual(a, b) {
			t.Fatalf("not deterministic")
		}
		if errA != nil {
			if r, ok := errA.(*bundle.Refusal); !ok || r.Code != vocab.BundleInvalid {
				t.Fatalf("error %v is not BUNDLE_INVALID", errA)
			}
		}
		for _, f := range a {
			if sanitize.Line(f) != f {
				t.Fatalf("finding %q holds control characters", f)
			}
		}
		if errA != nil && sanitize.Line(errA.Error()) != errA.Error() {
			t.Fatalf("error %q holds control characters", errA)
		}
	})
}

// FuzzCheckArchive: any archive the reader accepts is checked as a tick checks it, without a
// panic, and with a verdict or nothing (its corpus is FuzzRead's, internal/bundle).
func FuzzCheckArchive(f *testing.F) {
	meta := testkit.TarFile(bundle.MetaFile, testkit.BundleMeta("env-qa-02", nil, "compose.yaml", "config/a.toml"))
	files := []testkit.TarEntry{meta, testkit.TarFile("compose.yaml", okCompose), testkit.TarFile("config/a.toml", "a=1\n")}
	f.Add(testkit.Tar(f, files...))
	f.Add(testkit.Gzip(f, testkit.Tar(f, files[:2]...)))
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := bundle.Read(data, 64<<10)
		if err != nil {
			return
		}
		if r := Check(b, CheckInput{DesiredSha: b.Sha, EnvID: b.Meta.EnvID}); r != nil && r.Code == "" {
			t.Fatalf("a refusal without a code: %v", r)
		}
	})
}
