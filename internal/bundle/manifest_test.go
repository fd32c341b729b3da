package bundle

import (
	"testing"

	"github.com/tikali/monky-deployd/internal/vocab"
)

func TestManifestParse(t *testing.T) {
	b := &Bundle{Files: map[string][]byte{ManifestFile: []byte(`{"entries": [
  {"var": "GEMINI_API_KEY", "path": "monky/data/env-qa-02/see/gemini", "key": "value", "version": 3},
  {"use": "registry-auth", "path": "monky/data/env-qa-02/see/registry", "version": 1}]}`)}}
	m, err := b.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Entries) != 2 {
		t.Fatalf("entries = %d", len(m.Entries))
	}
	e := m.Entries[0]
	if e.Var != "GEMINI_API_KEY" || e.Key != "value" || e.Version == nil || *e.Version != 3 {
		t.Errorf("entry 0 = %+v", e)
	}
	reg, ok := m.RegistryAuth()
	if !ok || reg.Key != DefaultKey || reg.Path != "monky/data/env-qa-02/see/registry" {
		t.Errorf("registry entry = %+v, %v", reg, ok)
	}
	if v := m.Vars(); len(v) != 1 || !v["GEMINI_API_KEY"] {
		t.Errorf("vars = %v: registry-auth must not be a var", v)
	}
	empty := &Bundle{Files: map[string][]byte{DefaultComposeFile: []byte(okCompose)}}
	if m, err := empty.Manifest(); err != nil || len(m.Entries) != 0 {
		t.Errorf("absent manifest: %v %v", m, err)
	}
	for _, bad := range []string{`{"entries":[{"var":"1A","path":"p"}]}`, `{"entries":[{"var":"A","path":"p"},{"var":"A","path":"q"}]}`,
		`{"entries":[{"use":"registry-auth","path":"p"},{"use":"registry-auth","path":"q"}]}`, `{"entries":[{"use":"other","path":"p"}]}`,
		`{"entries":[{"var":"A","path":"p","version":1.5}]}`, `[]`} {
		if _, err := parseManifest([]byte(bad)); err == nil {
			t.Errorf("accepted %s", bad)
		} else {
			wantRefusal(t, err, vocab.BundleInvalid)
		}
	}
}
