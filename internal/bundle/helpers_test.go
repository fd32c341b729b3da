package bundle

import (
	"archive/tar"
	"testing"

	"github.com/tikali/monky-deployd/internal/testkit"
	"github.com/tikali/monky-deployd/internal/vocab"
)

const okCompose = "services:\n  api:\n    image: harbor.tikali.net/monky/api:1\n"

// validEntries is a minimal valid bundle for env, with the given extra files.
func validEntries(env string, extra ...testkit.TarEntry) []testkit.TarEntry {
	names := []string{"compose.yaml"}
	for _, e := range extra {
		if e.Header.Typeflag == tar.TypeReg {
			names = append(names, e.Header.Name)
		}
	}
	es := []testkit.TarEntry{testkit.TarFile("bundle.json", testkit.BundleMeta(env, nil, names...)), testkit.TarFile("compose.yaml", okCompose)}
	return append(es, extra...)
}

func wantRefusal(t *testing.T, err error, code vocab.Code) *Refusal {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want %s", code)
	}
	r, ok := err.(*Refusal)
	if !ok {
		t.Fatalf("got %T %v, want *Refusal %s", err, err, code)
	}
	if r.Code != code {
		t.Fatalf("got %v, want code %s", r, code)
	}
	return r
}
