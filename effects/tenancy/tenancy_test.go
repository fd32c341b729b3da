package tenancy

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/internal/testkit"
	"github.com/tikali/monky-deployd/transport"
)

const token = "hvs.CAESIsecretbearer0123456789"

var fixedNow = time.Date(2026, 11, 29, 14, 0, 0, 0, time.UTC)

type seen struct {
	Method, Path, Auth, UA, CT string
	Body                       map[string]any
}

// fakeTenancy serves handler and records every request it receives.
type fakeTenancy struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []seen
}

func newFake(t *testing.T, h http.HandlerFunc) *fakeTenancy {
	t.Helper()
	f := &fakeTenancy{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		s := seen{Method: r.Method, Path: r.URL.RequestURI(), Auth: r.Header.Get("Authorization"), UA: r.Header.Get("User-Agent"), CT: r.Header.Get("Content-Type")}
		if len(b) > 0 {
			if err := json.Unmarshal(b, &s.Body); err != nil {
				t.Errorf("request body is not JSON: %q", b)
			}
		}
		f.mu.Lock()
		f.reqs = append(f.reqs, s)
		f.mu.Unlock()
		h(w, r)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeTenancy) last(t *testing.T) seen {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.reqs) == 0 {
		t.Fatal("tenancy received no request")
	}
	return f.reqs[len(f.reqs)-1]
}

func client(t *testing.T, base string) *Client {
	t.Helper()
	hc, err := transport.HTTPClient(systemDialer{}, "", "", 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c := New(base, hc, "system", func() time.Time { return fixedNow })
	c.Version = "1.2.3"
	return c
}

type systemDialer struct{}

func (systemDialer) Name() string { return "system" }
func (systemDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}

func answer(status int, body string, hdr ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i+1 < len(hdr); i += 2 {
			w.Header().Set(hdr[i], hdr[i+1])
		}
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
}

func asErr(t *testing.T, err error) *effects.Error {
	t.Helper()
	e := testkit.ErrorAs[*effects.Error](t, err)
	if strings.Contains(err.Error(), token) {
		t.Fatalf("the bearer leaked into the error: %v", err)
	}
	return e
}

const sha7a = "7a10000000000000000000000000000000000000000000000000000000000000"

const checkinAnswer = `{"env_id": "env-qa-02", "desired_sha": "` + sha7a + `", "action": "apply", "purge_volumes": false,
 "bundle_url": "/v1/agent/bundle/env-qa-02/` + sha7a + `", "checkin_interval_s": 60, "new_field": {"x": 1},
 "vault": {"addr": "https://bao.cbs.tikali.net:8200", "mount": "monky", "prefix": "env-qa-02/see",
           "auth_mount": "jwt-tenancy", "auth_role": "see-env"}}`

func TestCheckin(t *testing.T) {
	f := newFake(t, answer(200, checkinAnswer))
	c := client(t, f.URL)
	got, err := c.Checkin(context.Background(), token, effects.CheckinRequest{EnvID: "env-qa-02", AgentVersion: "1.2.3", Host: "box-1"})
	if err != nil {
		t.Fatal(err)
	}
	if got.Action != "apply" || got.DesiredSha != sha7a || got.CheckinIntervalS != 60 || got.Vault == nil || got.Vault.Mount != "monky" || got.Vault.AuthRole != "see-env" {
		t.Fatalf("decoded %+v", got)
	}
	r := f.last(t)
	if r.Method != "POST" || r.Path != "/v1/agent/checkin" {
		t.Fatalf("%s %s", r.Method, r.Path)
	}
	if r.Auth != "Bearer "+token {
		t.Fatalf("Authorization %q", r.Auth)
	}
	if r.UA != "monky-deployd/1.2.3" || r.CT != "application/json" {
		t.Fatalf("User-Agent %q Content-Type %q", r.UA, r.CT)
	}
	if r.Body["env_id"] != "env-qa-02" || r.Body["applied_sha"] != "" || r.Body["host"] != "box-1" {
		t.Fatalf("body %v", r.Body)
	}
	if cs, ok := r.Body["containers"].([]any); !ok || len(cs) != 0 {
		t.Fatalf("containers must be a JSON list, got %v", r.Body["containers"])
	}
}

func TestCheckinAnswers(t *testing.T) {
	cases := []struct {
		name, body, wantErr string
		check               func(effects.CheckinResponse) bool
	}{
		{"none without vault", `{"env_id":"e","desired_sha":"` + sha7a + `","action":"none"}`, "", func(r effects.CheckinResponse) bool { return r.Vault == nil && r.Action == "none" }},
		{"down with purge", `{"action":"down","purge_volumes":true}`, "", func(r effects.CheckinResponse) bool { return r.PurgeVolumes }},
		{"none without a sha", `{"env_id":"e","desired_sha":"","action":"none"}`, "", func(r effects.CheckinResponse) bool { return r.DesiredSha == "" }},
		{"apply without bundle_url", `{"env_id":"env-qa-02","desired_sha":"` + sha7a + `","action":"apply"}`, "", func(r effects.CheckinResponse) bool {
			return r.BundleURL == "/v1/agent/bundle/env-qa-02/"+sha7a
		}},
		// A sha is 64 lowercase hex characters, whatever the action: case, length and control
		// characters are CHECKIN_SHAPE, and the detail never quotes the bytes.
		{"uppercase sha", `{"action":"apply","desired_sha":"` + strings.ToUpper(sha7a) + `"}`, "CHECKIN_SHAPE: desired_sha is not 64 lowercase hex characters (uppercase hex at byte 1)", nil},
		{"short sha", `{"action":"apply","desired_sha":"7a10"}`, "desired_sha is not 64 lowercase hex characters (4 characters)", nil},
		{"long sha", `{"action":"none","desired_sha":"` + sha7a + `0"}`, "(65 characters)", nil},
		{"escape in sha", `{"action":"apply","desired_sha":"\u001b[2J` + sha7a[4:] + `"}`, "(a control character at byte 0)", nil},
		{"not hex", `{"action":"down","desired_sha":"` + sha7a[:63] + `g"}`, "(a non-hex byte at byte 63)", nil},
		{"unknown action", `{"action":"up","desired_sha":"` + sha7a + `"}`, `CHECKIN_SHAPE: unknown action "up"`, nil},
		// vault.mount reaches the journal and the terminal: raw ESC or U+202E never do.
		{"escape in vault.mount", `{"action":"none","vault":{"mount":"monky\u001b[2J"}}`, "CHECKIN_SHAPE: vault.mount is not a mount path (a control character at byte 5)", nil},
		{"bidi override in vault.mount", `{"action":"none","vault":{"mount":"mo\u202enky"}}`, "vault.mount is not a mount path (a non-ASCII byte at byte 2)", nil},
		{"plain vault.mount", `{"action":"none","vault":{"mount":"kv-v2/monky"}}`, "", func(r effects.CheckinResponse) bool { return r.Vault.Mount == "kv-v2/monky" }},
		{"no action", `{"desired_sha":"down"}`, `unknown action ""`, nil},
		{"apply without sha", `{"action":"apply"}`, "apply without a desired_sha", nil},
		{"not JSON", `<html>gateway</html>`, "CHECKIN_SHAPE: answer is not a check-in: invalid JSON", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, answer(200, tc.body))
			got, err := client(t, f.URL).Checkin(context.Background(), token, effects.CheckinRequest{})
			if tc.wantErr != "" {
				e := asErr(t, err)
				if e.Kind != effects.Permanent || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %v (%v), want permanent %q", err, e.Kind, tc.wantErr)
				}
				return
			}
			if err != nil || !tc.check(got) {
				t.Fatalf("got %+v %v", got, err)
			}
		})
	}
}

func TestStatusMapping(t *testing.T) {
	cases := []struct {
		name   string
		status int
		body   string
		hdr    []string
		kind   effects.Kind
		code   string
		msg    string
		retry  time.Duration
	}{
		{"401 detail", 401, `{"detail": {"code": "AGENT_UNAUTHENTICATED", "message": "bearer refused"}}`, nil, effects.Unauthenticated, "AGENT_UNAUTHENTICATED", "bearer refused", 0},
		{"401 plain", 401, `Unauthorized`, nil, effects.Unauthenticated, "AGENT_UNAUTHENTICATED", "Unauthorized", 0},
		{"403 mismatch", 403, `{"detail": {"code": "AGENT_ENV_MISMATCH", "message": "token is for env-qa-03"}}`, nil, effects.EnvMismatch, "AGENT_ENV_MISMATCH", "token is for env-qa-03", 0},
		{"403 other", 403, `{"code": "FORBIDDEN", "message": "no"}`, nil, effects.EnvMismatch, "FORBIDDEN", "no", 0},
		{"404", 404, `{"detail": "Not Found"}`, nil, effects.NotFound, "", "Not Found", 0},
		{"429 seconds", 429, `{"detail": {"code": "LEASE_RATE_LIMITED", "message": "5 leases per hour"}}`, []string{"Retry-After", "120"}, effects.RateLimited, "LEASE_RATE_LIMITED", "5 leases per hour", 120 * time.Second},
		{"429 date", 429, `{"code": "LEASE_RATE_LIMITED"}`, []string{"Retry-After", fixedNow.Add(17 * time.Minute).Format(http.TimeFormat)}, effects.RateLimited, "LEASE_RATE_LIMITED", "", 17 * time.Minute},
		{"429 bare: RATE_LIMITED, the code of a 429 without its own", 429, ``, nil, effects.RateLimited, "RATE_LIMITED", "", 0},
		{"500", 500, `Internal Server Error`, nil, effects.Temporary, "", "Internal Server Error", 0},
		{"502", 502, `<html>bad gateway</html>`, nil, effects.Temporary, "", "bad gateway", 0},
		{"503 detail", 503, `{"detail": {"code": "MAINTENANCE", "message": "later"}}`, nil, effects.Temporary, "MAINTENANCE", "later", 0},
		{"400 code", 400, `{"detail": {"code": "BAD_ENV", "message": "env_id malformed"}}`, nil, effects.Permanent, "BAD_ENV", "env_id malformed", 0},
		{"409 top-level", 409, `{"code": "CONFLICT", "message": "busy"}`, nil, effects.Permanent, "CONFLICT", "busy", 0},
		{"422 plain", 422, "unprocessable\n", nil, effects.Permanent, "", "unprocessable", 0},
		{"302 not followed", 302, ``, []string{"Location", "http://elsewhere.example/"}, effects.Permanent, "", "redirect", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, answer(tc.status, tc.body, tc.hdr...))
			_, err := client(t, f.URL).Checkin(context.Background(), token, effects.CheckinRequest{})
			e := asErr(t, err)
			if e.Kind != tc.kind || string(e.Code) != tc.code || e.Status != tc.status {
				t.Fatalf("kind %v code %q status %d, want %v %q %d (%v)", e.Kind, e.Code, e.Status, tc.kind, tc.code, tc.status, err)
			}
			if !strings.Contains(e.Msg, tc.msg) {
				t.Fatalf("message %q lacks %q", e.Msg, tc.msg)
			}
			if e.RetryAfter != tc.retry {
				t.Fatalf("RetryAfter %v, want %v", e.RetryAfter, tc.retry)
			}
			if e.Op != "checkin" {
				t.Fatalf("Op %q", e.Op)
			}
		})
	}
}

func TestExitClassOfStatuses(t *testing.T) {
	// What the exit code is derived from: temporary for 429/5xx, not for 4xx.
	for status, temp := range map[int]bool{429: true, 500: true, 503: true, 400: false, 401: false, 403: false, 404: false} {
		f := newFake(t, answer(status, ""))
		err := client(t, f.URL).Report(context.Background(), token, effects.Report{})
		if effects.IsTemporary(err) != temp {
			t.Errorf("status %d: temporary=%v, want %v", status, effects.IsTemporary(err), temp)
		}
	}
}

func TestTokenNeverInErrors(t *testing.T) {
	echo := func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(400)
		json.NewEncoder(w).Encode(map[string]any{"detail": map[string]string{"code": "BAD " + r.Header.Get("Authorization"), "message": "you sent " + r.Header.Get("Authorization")}})
	}
	f := newFake(t, echo)
	_, err := client(t, f.URL).Lease(context.Background(), token, "env-qa-02", "apply")
	e := asErr(t, err) // fails when the token is in the message
	if !strings.Contains(e.Msg, "[REDACTED]") {
		t.Fatalf("message %q", e.Msg)
	}
}

func TestTransportFailures(t *testing.T) {
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := l.Addr().String()
	l.Close()
	_, err := client(t, "http://"+dead).Checkin(context.Background(), token, effects.CheckinRequest{})
	e := asErr(t, err)
	if e.Kind != effects.Temporary || e.Code != "CONNECTION_REFUSED" || !strings.Contains(err.Error(), "nothing listens at "+dead+" (transport system)") {
		t.Fatalf("refused: %v (%v)", err, e.Kind)
	}

	cut := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		conn, buf, _ := w.(http.Hijacker).Hijack()
		buf.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 500\r\n\r\n{\"action\":")
		buf.Flush()
		conn.Close()
	})
	_, err = client(t, cut.URL).Checkin(context.Background(), token, effects.CheckinRequest{})
	e = asErr(t, err)
	if e.Kind != effects.Temporary {
		t.Fatalf("truncated body: %v (%v)", err, e.Kind)
	}

	slow := newFake(t, func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err = client(t, slow.URL).Checkin(ctx, token, effects.CheckinRequest{})
	if e = asErr(t, err); e.Kind != effects.Temporary || e.Code != "TIMEOUT" {
		t.Fatalf("timeout: %v (%v %q)", err, e.Kind, e.Code)
	}
}

func TestLease(t *testing.T) {
	cases := []struct {
		name, body, addr, wantErr string
	}{
		{"top-level addr", `{"env_id":"env-qa-02","login_jwt":"eyJhbGciOiJFUzI1NiJ9.e30.sig","ttl_s":3600,"mount":"jwt-tenancy","role":"see-env","addr":"https://bao.cbs.tikali.net:8200","extra":1}`, "https://bao.cbs.tikali.net:8200", ""},
		{"vault.addr fallback", `{"env_id":"env-qa-02","login_jwt":"eyJhbGciOiJFUzI1NiJ9.e30.sig","ttl_s":3600,"vault":{"addr":"https://old.example:8200"}}`, "https://old.example:8200", ""},
		{"top-level wins", `{"login_jwt":"eyJ.x.y","addr":"https://a:1","vault":{"addr":"https://b:2"}}`, "https://a:1", ""},
		{"wrapping_token", `{"env_id":"env-qa-02","wrapping_token":"s.wrapwrapwrap","addr":"https://x"}`, "", "LEASE_SHAPE: tenancy answered the retired AppRole lease shape (wrapping_token): AppRole is gone and there is nothing to unwrap"},
		{"role_id", `{"env_id":"env-qa-02","role_id":"abc","secret_id":"def","login_jwt":"eyJ.x.y"}`, "", "LEASE_SHAPE: tenancy answered the retired AppRole lease shape (role_id)"},
		{"no login_jwt", `{"env_id":"env-qa-02","ttl_s":3600}`, "", "LEASE_SHAPE: lease answer has no login_jwt"},
		{"not JSON", `nope`, "", "LEASE_SHAPE"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, answer(200, tc.body))
			l, err := client(t, f.URL).Lease(context.Background(), token, "env-qa-02", "apply")
			r := f.last(t)
			if r.Path != "/v1/agent/lease" || r.Body["env_id"] != "env-qa-02" || r.Body["reason"] != "apply" || r.Auth != "Bearer "+token {
				t.Fatalf("request %+v", r)
			}
			if tc.wantErr != "" {
				e := asErr(t, err)
				if e.Kind != effects.Permanent || e.Code != "LEASE_SHAPE" || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %v, want %q", err, tc.wantErr)
				}
				if strings.Contains(err.Error(), "s.wrapwrapwrap") || strings.Contains(err.Error(), "eyJ") {
					t.Fatalf("a grant leaked into %v", err)
				}
				return
			}
			if err != nil || l.Addr != tc.addr || l.LoginJWT == "" {
				t.Fatalf("got %+v %v", l, err)
			}
		})
	}
	t.Run("rate limited", func(t *testing.T) {
		f := newFake(t, answer(429, `{"detail":{"code":"LEASE_RATE_LIMITED","message":"5 per hour"}}`, "Retry-After", "900"))
		_, err := client(t, f.URL).Lease(context.Background(), token, "env-qa-02", "renew")
		e := asErr(t, err)
		if e.Kind != effects.RateLimited || e.Code != "LEASE_RATE_LIMITED" || e.RetryAfter != 15*time.Minute || !effects.IsTemporary(err) {
			t.Fatalf("got %v %v %v", err, e.Kind, e.RetryAfter)
		}
	})
}

func TestFetchBundle(t *testing.T) {
	payload := strings.Repeat("x", 1000)
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/v1/agent/bundle/env-qa-02/abc":
			w.Header().Set("X-Bundle-Sha", "ABC")
		case "/api/v1/agent/bundle/env-qa-02/def":
			w.Header().Set("X-Bundle-Sha256", "def")
		case "/api/v1/agent/bundle/env-qa-02/none":
		default:
			w.WriteHeader(404)
			io.WriteString(w, `{"detail":{"code":"BUNDLE_NOT_FOUND","message":"no such bundle"}}`)
			return
		}
		w.Header().Set("Content-Type", "application/x-tar")
		io.WriteString(w, payload)
	})
	c := client(t, f.URL+"/api/") // a base with a path: relative bundle_urls join under it
	ctx := context.Background()

	var body bytes.Buffer
	b, err := c.FetchBundle(ctx, token, "/v1/agent/bundle/env-qa-02/abc", 1000, &body)
	if err != nil || body.String() != payload || b.Size != 1000 || b.HeaderSha != "abc" {
		t.Fatalf("exact limit: sha %q len %d size %d %v", b.HeaderSha, body.Len(), b.Size, err)
	}
	if r := f.last(t); r.Method != "GET" || r.Auth != "Bearer "+token || r.Path != "/api/v1/agent/bundle/env-qa-02/abc" {
		t.Fatalf("request %+v", r)
	}
	if b, err = c.FetchBundle(ctx, token, "v1/agent/bundle/env-qa-02/def", 0, io.Discard); err != nil || b.HeaderSha != "def" {
		t.Fatalf("X-Bundle-Sha256: %q %v", b.HeaderSha, err)
	}
	if b, err = c.FetchBundle(ctx, token, f.URL+"/api/v1/agent/bundle/env-qa-02/none", 0, io.Discard); err != nil || b.HeaderSha != "" {
		t.Fatalf("absolute URL on tenancy, no header: %q %v", b.HeaderSha, err)
	}

	_, err = c.FetchBundle(ctx, token, "/v1/agent/bundle/env-qa-02/abc", 999, io.Discard)
	e := asErr(t, err)
	if e.Kind != effects.Permanent || e.Code != "BUNDLE_INVALID" || !strings.Contains(e.Msg, "bundle larger than max_bundle_bytes") {
		t.Fatalf("over the limit: %v", err)
	}

	_, err = c.FetchBundle(ctx, token, "/v1/agent/bundle/env-qa-02/gone", 0, io.Discard)
	if e = asErr(t, err); e.Kind != effects.NotFound || e.Code != "BUNDLE_NOT_FOUND" {
		t.Fatalf("404: %v", err)
	}

	before := len(f.reqs)
	_, err = c.FetchBundle(ctx, token, "http://evil.example/v1/agent/bundle/x", 0, io.Discard)
	if e = asErr(t, err); e.Kind != effects.Permanent || !strings.Contains(e.Msg, "refusing to send the bearer to http://evil.example") {
		t.Fatalf("foreign host: %v", err)
	}
	if len(f.reqs) != before {
		t.Fatal("a request was made for a foreign bundle_url")
	}

	// the box's own write failing (a full disk) is the box's fault, named by the file, never the
	// network's
	_, err = c.FetchBundle(ctx, token, "/v1/agent/bundle/env-qa-02/abc", 0, fullWriter{})
	if _, unwritable := effects.Unwritable(err); !unwritable || effects.KindOf(err) == effects.Temporary {
		t.Fatalf("a full disk under the download: %v", err)
	}
}

// fullWriter is a file on a full disk.
type fullWriter struct{}

func (fullWriter) Write([]byte) (int, error) {
	return 0, &fs.PathError{Op: "write", Path: "/var/lib/monky-deployd/bundles/.fetch-1", Err: syscall.ENOSPC}
}

func TestReport(t *testing.T) {
	for _, status := range []int{200, 202, 204} {
		f := newFake(t, answer(status, ""))
		err := client(t, f.URL).Report(context.Background(), token, effects.Report{EnvID: "env-qa-02", Sha: "7a10", Result: "failed", AgentVersion: "1.2.3", Detail: "ROLLBACK_REFUSED: x"})
		if err != nil {
			t.Fatalf("status %d not acknowledged: %v", status, err)
		}
		r := f.last(t)
		if r.Path != "/v1/agent/report" || r.Body["result"] != "failed" || r.Body["detail"] != "ROLLBACK_REFUSED: x" || r.Auth != "Bearer "+token {
			t.Fatalf("request %+v", r)
		}
		if _, ok := r.Body["log_tail"]; ok {
			t.Fatal("empty log_tail must be omitted")
		}
	}
}

// A failed report's body carries the why as PROTOCOL.md §1 shapes it; an applied one has none.
func TestReportCarriesTheWhy(t *testing.T) {
	f := newFake(t, answer(200, ""))
	why := &effects.ReportWhy{Code: "UNHEALTHY", Verdict: "needs_person", Since: "2026-12-01T14:02:00Z", Fault: "f", Evidence: "e", Next: "n", Fix: "x"}
	if err := client(t, f.URL).Report(context.Background(), token, effects.Report{EnvID: "env-qa-02", Result: "failed", Why: why}); err != nil {
		t.Fatal(err)
	}
	w, ok := f.last(t).Body["why"].(map[string]any)
	if !ok || len(w) != 7 || w["code"] != "UNHEALTHY" || w["verdict"] != "needs_person" || w["since"] != "2026-12-01T14:02:00Z" ||
		w["fault"] != "f" || w["evidence"] != "e" || w["next"] != "n" || w["fix"] != "x" {
		t.Fatalf("why in the body: %#v", f.last(t).Body["why"])
	}
	if err := client(t, f.URL).Report(context.Background(), token, effects.Report{EnvID: "env-qa-02", Result: "applied"}); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.last(t).Body["why"]; ok {
		t.Fatal("an applied report carries a why")
	}
}

func TestBadBaseURL(t *testing.T) {
	_, err := New("monky.tenancy.deploy:443", &http.Client{}, "system", nil).Checkin(context.Background(), token, effects.CheckinRequest{})
	if e := asErr(t, err); e.Kind != effects.Permanent || e.Code != "TENANCY_URL" {
		t.Fatalf("got %v", err)
	}
}

func TestRetryAfter(t *testing.T) {
	cases := map[string]time.Duration{
		"":   0,
		"0":  0,
		"30": 30 * time.Second,
		"-5": 0,
		fixedNow.Add(90 * time.Second).Format(http.TimeFormat): 90 * time.Second,
		fixedNow.Add(-time.Hour).Format(http.TimeFormat):       0,
		"soon": 0,
	}
	for in, want := range cases {
		if got := retryAfter(in, fixedNow); got != want {
			t.Errorf("Retry-After %q = %v, want %v", in, got, want)
		}
	}
}
