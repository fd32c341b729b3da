package states_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tikali/monky-deployd/machine/explain"
)

// Tenancy's check-in names the KV mount (vault.mount); it reached the journal, the logs and
// explain raw, in every manifest path's refusal. A raw ESC or U+202E (which reverses what a
// terminal shows after it) is CHECKIN_SHAPE now, and never printed.
func TestVaultMountControlCharactersNeverPrinted(t *testing.T) {
	for _, mount := range []string{"monky\x1b[2J", "mon\u202eky"} {
		h := newHarness(t)
		h.release("v1", nil)
		inner := h.sim.TenancyHandler()
		h.ten.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/v1/agent/checkin" {
				inner.ServeHTTP(w, r)
				return
			}
			rec := httptest.NewRecorder()
			inner.ServeHTTP(rec, r)
			var m map[string]any
			_ = json.Unmarshal(rec.Body.Bytes(), &m)
			m["vault"] = map[string]any{"mount": mount}
			b, _ := json.Marshal(m)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(rec.Code)
			_, _ = io.Copy(w, bytes.NewReader(b))
		})
		h.wantExit(h.tick(), 1)
		d, err := explain.Build(h.st, explain.Options{Now: h.clock.Now()})
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		explain.WriteText(&out, d)
		j, _ := json.Marshal(d)
		st, _ := explain.BuildStatus(h.st, h.clock.Now(), nil)
		explain.WriteStatusText(&out, st)
		for name, s := range map[string]string{"log": h.logs.String(), "explain and status": out.String(), "explain --json": string(j)} {
			if strings.ContainsAny(s, "\x1b\u202e") || strings.Contains(s, `\u001b`) || strings.Contains(s, `\u202e`) {
				t.Errorf("%q: %s carries it:\n%q", mount, name, s)
			}
		}
		if !strings.Contains(out.String(), "CHECKIN_SHAPE") {
			t.Errorf("explain does not name CHECKIN_SHAPE:\n%s", out.String())
		}
	}
}
