package states

import (
	"encoding/base64"
	"encoding/json"
	"path/filepath"
	"strings"

	"github.com/tikali/monky-deployd/effects/files"
	"github.com/tikali/monky-deployd/internal/bundle"
	"github.com/tikali/monky-deployd/internal/redact"
)

// maskBoxSecrets registers with the redactor every secret value the box already holds — the
// values rendered into current/.env and the registry credential in docker/config.json — so
// that output from containers (a heartbeat's failed report, compose's errors) is masked in a
// tick that did not read them from OpenBao itself. Called at the start of every tick. A file
// that is absent or unreadable masks nothing and is not an error here: the step that needs it
// says so.
func (tk *tick) maskBoxSecrets() {
	cur := tk.currentDir()
	if env, err := tk.readOwnFile(filepath.Join(cur, ".env")); err == nil {
		tpl, _ := tk.readOwnFile(filepath.Join(cur, bundle.TemplateFile))
		for _, v := range bundle.RenderedValues(tpl, env) {
			redact.Add(v)
		}
	}
	raw, err := tk.readOwnFile(filepath.Join(tk.Cfg.DockerConfigDir(), "config.json"))
	if err != nil {
		return
	}
	var doc struct {
		Auths map[string]struct {
			Auth     string `json:"auth"`
			Password string `json:"password"`
		} `json:"auths"`
	}
	if json.Unmarshal(raw, &doc) != nil {
		return
	}
	for _, e := range doc.Auths {
		redact.Add(e.Auth)
		redact.Add(e.Password)
		if b, err := base64.StdEncoding.DecodeString(e.Auth); err == nil {
			if _, pw, ok := strings.Cut(string(b), ":"); ok {
				redact.Add(pw)
			}
		}
	}
}

// readOwnFile reads one of the agent's own files: a trusted file on the real filesystem
// (files.ReadTrusted), through the seam when a test set one.
func (tk *tick) readOwnFile(path string) ([]byte, error) {
	if tk.FS == nil {
		return files.ReadTrusted(path, 1<<20)
	}
	return tk.FS.ReadFile(path)
}
