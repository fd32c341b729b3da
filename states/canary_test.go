package states_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tikali/monky-deployd/machine/explain"
)

// leaks returns which secrets appear in blob, raw or base64- or JSON-encoded.
func leaks(blob []byte, secrets []string) []string {
	var found []string
	for _, s := range secrets {
		forms := []string{s, base64.StdEncoding.EncodeToString([]byte(s)), base64.RawURLEncoding.EncodeToString([]byte(s))}
		if j, _ := json.Marshal(s); len(j) > 2 {
			forms = append(forms, string(j[1:len(j)-1]))
		}
		for _, f := range forms {
			if bytes.Contains(blob, []byte(f)) {
				found = append(found, s)
				break
			}
		}
	}
	return found
}

func TestNoSecretLeavesTheSecretFiles(t *testing.T) {
	h := newHarness(t)
	grant, _ := os.ReadFile(filepath.Join(h.kit, "bootstrap.jwt"))
	secrets := []string{"canary-gemini-v1-Qx7", "canary-gemini-v2-Zp9", "canary-db-pw-Kw3", strings.TrimSpace(string(grant))}
	if got := leaks([]byte("x "+secrets[0]+" y"), secrets); len(got) != 1 {
		t.Fatalf("the scanner misses a planted canary: %v", got)
	}
	h.apply("v1")
	tok, _ := os.ReadFile(h.cfg.TokenPath())
	secrets = append(secrets, strings.TrimSpace(string(tok)))
	// an unhealthy heartbeat whose logs print a secret
	h.dockerKnob("unhealthy", "api\n")
	h.dockerKnob("log-line", "api | DB_PASSWORD=canary-db-pw-Kw3")
	h.wantExit(h.tick(), 1)
	// a refusal naming variables
	h.release("v2", func(f map[string][]byte) { f[".env.template"] = append(f[".env.template"], "X=${UNSUPPLIED}\n"...) })
	h.wantExit(h.tick(), 1)

	var out bytes.Buffer
	out.Write(h.logs.Bytes())
	db, _ := os.ReadFile(h.cfg.StatePath())
	out.Write(db)
	reps, _ := json.Marshal(h.sim.Reports(env))
	out.Write(reps)
	doc, _ := explain.Build(h.st, explain.Options{N: 100, Now: h.clock.Now()})
	explain.WriteText(&out, doc)
	js, _ := json.Marshal(doc)
	out.Write(js)
	st, _ := explain.BuildStatus(h.st, h.clock.Now(), nil)
	explain.WriteStatusText(&out, st)
	js, _ = json.Marshal(st)
	out.Write(js)
	if got := leaks(out.Bytes(), secrets); len(got) != 0 {
		t.Errorf("%d secret(s) leaked into logs, the state file, reports or explain/status", len(got))
	}
	if !strings.Contains(out.String(), "UNSUPPLIED") {
		t.Errorf("the refusal does not name the variable")
	}
}
