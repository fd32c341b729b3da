package testkit

import (
	"os"
	"path/filepath"
	"testing"
)

func TestPrebuiltAgentIsTakenByVersion(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"monky-deployd", "monky-deployd-0.0.0-e2e"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "monky-deployd-1.2.3"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv(AgentDirEnv, dir)
	for version, want := range map[string]string{
		"":          filepath.Join(dir, "monky-deployd"),
		"0.0.0-e2e": filepath.Join(dir, "monky-deployd-0.0.0-e2e"),
		"9.9.9":     "", // none built: BuildAgent builds it
		"1.2.3":     "", // a directory is no agent
	} {
		if got := prebuiltAgent(version); got != want {
			t.Errorf("prebuiltAgent(%q) = %q, want %q", version, got, want)
		}
	}
	t.Setenv(AgentDirEnv, "")
	if got := prebuiltAgent(""); got != "" {
		t.Errorf("with %s unset, prebuiltAgent = %q, want none", AgentDirEnv, got)
	}
}
