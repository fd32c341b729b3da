package sim

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"

	"github.com/tikali/monky-deployd/internal/vocab"
)

const maxBody = 1 << 20

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// tenancyError writes tenancy's error body {"detail": {"code", "message"}}.
func tenancyError(w http.ResponseWriter, status int, code vocab.Code, msg string) {
	writeJSON(w, status, map[string]any{"detail": map[string]string{"code": string(code), "message": msg}})
}

// baoError writes OpenBao's error body {"errors": [...]}.
func baoError(w http.ResponseWriter, status int, msgs ...string) {
	if msgs == nil {
		msgs = []string{}
	}
	writeJSON(w, status, map[string]any{"errors": msgs})
}

// readBody reads the request body (up to maxBody) and puts it back for the next reader.
func readBody(r *http.Request) []byte {
	if r.Body == nil {
		return nil
	}
	b, _ := io.ReadAll(io.LimitReader(r.Body, maxBody))
	_ = r.Body.Close()
	r.Body = io.NopCloser(bytes.NewReader(b))
	return b
}

// applyFail answers r by the first matching FailRule; it reports whether it did.
func (s *Sim) applyFail(w http.ResponseWriter, r *http.Request, bao bool) bool {
	rule := s.matchFail(r.URL.Path)
	if rule == nil {
		return false
	}
	s.opts.Logf("sim: fault %s %s -> %d %s", r.Method, r.URL.Path, rule.Status, rule.Code)
	if rule.Status == 0 {
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				_ = conn.Close()
				return true
			}
		}
		rule.Status = http.StatusBadGateway
	}
	if rule.RetryAfter != "" {
		w.Header().Set("Retry-After", rule.RetryAfter)
	}
	msg := rule.Message
	if msg == "" {
		msg = http.StatusText(rule.Status)
	}
	if bao {
		if rule.Code != "" {
			msg = rule.Code + ": " + msg
		}
		baoError(w, rule.Status, msg)
		return true
	}
	tenancyError(w, rule.Status, vocab.Code(rule.Code), msg)
	return true
}

// bearer returns the token of an "Authorization: Bearer <token>" header.
func bearer(r *http.Request) string {
	h := r.Header.Get("Authorization")
	if len(h) > 7 && strings.EqualFold(h[:7], "bearer ") {
		return strings.TrimSpace(h[7:])
	}
	return ""
}
