package states_test

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/tikali/monky-deployd/machine/explain"
)

// Secrets reshaped on their way out (issue 29, class 6): cut into lines by a service and
// prefixed by compose, or cut by the error window.

// everything is what leaves the box or stays on it in words: logs, the state file, reports,
// explain and status.
func (h *harness) everything() []byte {
	h.t.Helper()
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
	return out.Bytes()
}

// A multi-line secret printed by a failing service reaches the report's log_tail with
// compose's prefix on every line: no line of it may be there in clear.
func TestMultiLineSecretNeverLeavesInClear(t *testing.T) {
	h := newHarness(t)
	lines := []string{"-----BEGIN CANARY KEY-----", "canary-line-one-MIIEvQIBADAN", "canary-line-two-bKcwggSjAgEA", "-----END CANARY KEY-----"}
	h.sim.PutSecret(env, "db", map[string]string{"password": strings.Join(lines, "\n")})
	h.apply("v1")
	h.dockerKnob("unhealthy", "api\n")
	h.dockerKnob("log-line", "the key is:\n"+strings.Join(lines, "\n")+"\n")
	h.wantExit(h.tick(), 1)
	if res, _ := h.lastReport(); res != "failed" {
		t.Fatalf("report %q, want failed with a log tail", res)
	}
	reps, _ := json.Marshal(h.sim.Reports(env))
	if !strings.Contains(string(reps), "the key is:") {
		t.Fatalf("the report carries no log tail: %s", reps)
	}
	all := string(h.everything())
	for _, l := range lines {
		if strings.Contains(all, l) {
			t.Errorf("a line of the secret in clear: %q", l)
		}
	}
}

// Compose's error output is cut to its last 600 bytes: a secret the cut falls inside used to
// leave its tail in clear in the failure, the state file, the logs and the report.
func TestSecretCutByTheErrorWindowLeavesNoTail(t *testing.T) {
	const secret = "canary-db-pw-Kw3"
	for _, shift := range []int{3, 8, 12} {
		h := newHarness(t)
		// the window's first byte falls at byte shift of the secret
		h.dockerKnob("up-error", "password "+secret+strings.Repeat("y", 600-len(secret)+shift)+"\n")
		h.release("v1", nil)
		h.wantExit(h.tick(), 1)
		if rec := h.record(); rec.Failure == nil || rec.Failure.Code != "COMPOSE_UP_FAILED" {
			t.Fatalf("failure %+v", rec.Failure)
		}
		all := string(h.everything())
		if tail := secret[shift:]; strings.Contains(all, tail) {
			t.Errorf("shift %d: the secret's tail %q in clear", shift, tail)
		}
	}
}

// A secret a service prints cut over two lines, re-cased or in JSON `\u` escapes (issue 47,
// finding 8): neither half, nor the whole in any of those forms, reaches the logs, the state
// file, the report, explain or status.
func TestSecretSplitRecasedOrEscapedNeverLeavesInClear(t *testing.T) {
	const secret = "Zx81-split-Qw93-pass"
	h := newHarness(t)
	h.sim.PutSecret(env, "db", map[string]string{"password": secret})
	h.apply("v1")
	h.dockerKnob("unhealthy", "api\n")
	h.dockerKnob("log-line", "the key is: Zx81-spli\nt-Qw93-pass\nshouted: ZX81-SPLIT-QW93-PASS\n"+
		`as json: "\u005a\u0078\u0038\u0031-split-Qw93-pass"`+"\n")
	h.wantExit(h.tick(), 1)
	reps, _ := json.Marshal(h.sim.Reports(env))
	if !strings.Contains(string(reps), "the key is:") {
		t.Fatalf("the report carries no log tail: %s", reps)
	}
	all := strings.ToLower(string(h.everything()))
	for _, f := range []string{"zx81-spli", "t-qw93-pass", "-split-qw93"} {
		if strings.Contains(all, f) {
			t.Errorf("%q of the secret in clear", f)
		}
	}
}
