package model

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tikali/monky-deployd/internal/bundle"
	"github.com/tikali/monky-deployd/internal/vocab"
)

// What the testdata bundles are for: one accepted with secrets, one minimal, one refused.
func TestTestdataBundlesCheck(t *testing.T) {
	read := func(name string) *bundle.Bundle {
		raw, err := os.ReadFile(filepath.Join("..", "..", "testdata", "bundles", name))
		if err != nil {
			t.Fatal(err)
		}
		b, err := bundle.Read(raw, bundle.DefaultMaxBytes)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	basic := read("qa-basic.tar.gz")
	if r := Check(basic, CheckInput{DesiredSha: basic.Sha, EnvID: "env-qa-02", KVMount: "monky"}); r != nil {
		t.Errorf("qa-basic refused: %v", r)
	}
	if got := bundle.References(basic.Files[bundle.TemplateFile]); strings.Join(got, ",") != "DATABASE_URL,GEMINI_API_KEY" {
		t.Errorf("qa-basic references = %v", got)
	}
	min := read("dev-minimal.tar")
	if r := Check(min, CheckInput{DesiredSha: min.Sha, EnvID: "env-dev-01"}); r != nil {
		t.Errorf("dev-minimal refused: %v", r)
	}
	priv := read("qa-privileged.tar.gz")
	r := Check(priv, CheckInput{DesiredSha: priv.Sha, EnvID: "env-qa-02"})
	if r == nil || r.Code != vocab.PrivilegedRefused {
		t.Fatalf("qa-privileged: got %v, want %s", r, vocab.PrivilegedRefused)
	}
	for _, want := range []string{"service node-agent: privileged: true", "pid: host", "bind /var/run/docker.sock → /var/run/docker.sock", "bind / → /host"} {
		if !strings.Contains(r.Detail, want) {
			t.Errorf("detail %q lacks %q", r.Detail, want)
		}
	}
}
