package bao

import (
	"context"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/transport"
)

// session makes every call the agent makes and returns what the server saw, in order.
func session(t *testing.T, c *Client, f *fakeBao) []call {
	t.Helper()
	ctx := context.Background()
	f.mu.Lock()
	f.calls = nil
	f.mu.Unlock()
	if _, err := c.Login(ctx, "jwt-tenancy", "see-env", grant); err != nil {
		t.Fatal(err)
	}
	if _, err := c.LookupSelf(ctx, tok); err != nil {
		t.Fatal(err)
	}
	if _, err := c.RenewSelf(ctx, tok, 24*time.Hour); err != nil {
		t.Fatal(err)
	}
	if v, err := c.ReadKV(ctx, tok, "monky/data/env-qa-02/see/gemini", "value", 3); err != nil || v != kvSecret {
		t.Fatalf("read: %v", err)
	}
	_, err := c.ReadKV(ctx, tok, "monky/data/env-qa-02/see/sealed", "value", 0)
	wantErr(t, err, effects.Temporary, "", "Vault is sealed")
	if err := c.RevokeSelf(ctx, tok); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]call(nil), f.calls...)
}

// TestVaultEnvironmentChangesNothing sets every VAULT_* variable vault/api reads (and the
// proxy variables) to hostile values, well-formed and malformed, and checks that each call
// reaches the configured server exactly as it does with a clean environment: same methods,
// paths, queries, bodies and headers, one request per call (no retries, no rate limit), no
// token, namespace, wrapping or extra header from the environment, nothing sent elsewhere,
// and TLS verification unchanged.
func TestVaultEnvironmentChangesNothing(t *testing.T) {
	decoy := newFakeBao(t)
	f := newFakeBao(t)
	want := session(t, newClient(t, f.URL), f)
	if len(want) != 6 {
		t.Fatalf("baseline: %d requests for 6 calls", len(want))
	}
	for _, c := range want {
		if c.Header.Get("X-Vault-Request") != "true" {
			t.Fatalf("%s: no X-Vault-Request", c.Path)
		}
	}

	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(f.serve))
	t.Cleanup(tlsSrv.Close)
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.pem")
	writePEM(t, caFile, tlsSrv.Certificate().Raw)

	wellFormed := map[string]string{
		"VAULT_ADDR":              decoy.URL,
		"VAULT_AGENT_ADDR":        decoy.URL,
		"VAULT_TOKEN":             "hvs.FROM-ENVIRONMENT",
		"VAULT_NAMESPACE":         "evil-ns",
		"VAULT_CACERT":            caFile,
		"VAULT_CAPATH":            dir,
		"VAULT_SKIP_VERIFY":       "true",
		"VAULT_TLS_SERVER_NAME":   "example.com",
		"VAULT_CLIENT_TIMEOUT":    "1",
		"VAULT_MAX_RETRIES":       "7",
		"VAULT_RATE_LIMIT":        "0.001:1",
		"VAULT_SRV_LOOKUP":        "true",
		"VAULT_HTTP_PROXY":        "http://127.0.0.1:1",
		"VAULT_PROXY_ADDR":        "http://127.0.0.1:1",
		"VAULT_DISABLE_REDIRECTS": "false",
		"VAULT_WRAP_TTL":          "5m",
		"VAULT_HEADERS":           `{"X-Injected":"yes"}`,
		"VAULT_MFA":               "totp:123456",
		"HTTP_PROXY":              "http://127.0.0.1:1",
		"HTTPS_PROXY":             "http://127.0.0.1:1",
	}
	malformed := map[string]string{
		"VAULT_ADDR":              "::garbage",
		"VAULT_AGENT_ADDR":        "::garbage",
		"VAULT_TOKEN":             "hvs.FROM-ENVIRONMENT\x01",
		"VAULT_NAMESPACE":         "evil-ns",
		"VAULT_CACERT":            "/nonexistent/ca.pem",
		"VAULT_CACERT_BYTES":      "garbage",
		"VAULT_CAPATH":            "/nonexistent",
		"VAULT_CLIENT_CERT":       "/nonexistent/cert.pem",
		"VAULT_CLIENT_KEY":        "/nonexistent/key.pem",
		"VAULT_SKIP_VERIFY":       "garbage",
		"VAULT_TLS_SERVER_NAME":   "wrong.example",
		"VAULT_CLIENT_TIMEOUT":    "garbage",
		"VAULT_MAX_RETRIES":       "garbage",
		"VAULT_RATE_LIMIT":        "garbage",
		"VAULT_SRV_LOOKUP":        "garbage",
		"VAULT_HTTP_PROXY":        "%zz",
		"VAULT_PROXY_ADDR":        "%zz",
		"VAULT_DISABLE_REDIRECTS": "garbage",
		"VAULT_WRAP_TTL":          "garbage",
		"VAULT_HEADERS":           `{"X-Vault-Token":"hvs.FROM-HEADERS"`,
		"VAULT_MFA":               "garbage",
	}
	for name, env := range map[string]map[string]string{"well-formed": wellFormed, "malformed": malformed} {
		t.Run(name, func(t *testing.T) {
			for k, v := range env {
				t.Setenv(k, v)
			}
			c := newClient(t, f.URL)
			for k, v := range env {
				if got := os.Getenv(k); got != v {
					t.Fatalf("New left %s=%q, want %q", k, got, v)
				}
			}
			got := session(t, c, f)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("requests differ from a clean environment's:\n got %s\nwant %s", show(got), show(want))
			}
			if decoy.last().Path != "" {
				t.Fatalf("VAULT_ADDR's server was called: %+v", decoy.last())
			}
			// TLS: no CA given to the agent, so the test server's certificate is refused,
			// whatever VAULT_CACERT and VAULT_SKIP_VERIFY say.
			_, err := newClient(t, tlsSrv.URL).Login(context.Background(), "jwt-tenancy", "see-env", grant)
			wantErr(t, err, effects.TLS, "TLS_UNKNOWN_CA", "signed by an unknown authority")
		})
	}
}

// show is the requests as the server saw them, headers sorted, for a failure message.
func show(cs []call) string {
	var b strings.Builder
	for _, c := range cs {
		keys := make([]string, 0, len(c.Header))
		for k := range c.Header {
			keys = append(keys, k+"="+strings.Join(c.Header[k], ","))
		}
		sort.Strings(keys)
		b.WriteString("\n  " + c.Method + " " + c.Path + "?" + c.Query + " " + strings.Join(keys, " "))
	}
	return b.String()
}

func writePEM(t *testing.T, file string, der []byte) {
	t.Helper()
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestOneRequestPerCall: vault/api's retries and redirect following are off; an error answer
// is classified from its status and headers, after exactly one request.
func TestOneRequestPerCall(t *testing.T) {
	var decoyHits atomic.Int32
	decoy := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { decoyHits.Add(1) }))
	t.Cleanup(decoy.Close)
	var hits atomic.Int32
	var status atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		switch s := int(status.Load()); s {
		case 307:
			http.Redirect(w, r, decoy.URL+r.URL.Path, s)
		case 429:
			w.Header().Set("Retry-After", "7")
			reply(w, s, `{"errors":["request path \"auth/token/lookup-self\": rate limit quota exceeded"]}`)
		default:
			reply(w, s, `{"errors":["internal error"]}`)
		}
	}))
	t.Cleanup(srv.Close)
	c := newClient(t, srv.URL)
	for _, tc := range []struct {
		status int
		kind   effects.Kind
		msg    string
	}{
		{500, effects.Temporary, "(HTTP 500): internal error"},
		{502, effects.Temporary, "(HTTP 502): internal error"},
		{412, effects.Temporary, "(HTTP 412)"},
		{429, effects.RateLimited, "rate limit quota exceeded"},
		{307, effects.Temporary, "redirected to \"" + decoy.URL + "/v1/auth/token/lookup-self\" (not followed"},
	} {
		hits.Store(0)
		status.Store(int32(tc.status))
		_, err := c.LookupSelf(context.Background(), tok)
		code := ""
		if tc.status == 429 {
			code = "RATE_LIMITED" // a 429 carries a code, so the docs' table words it
		}
		wantErr(t, err, tc.kind, code, tc.msg)
		if n := hits.Load(); n != 1 {
			t.Errorf("%d: %d requests, want 1", tc.status, n)
		}
		if tc.status == 429 {
			if e := err.(*effects.Error); e.RetryAfter != 7*time.Second {
				t.Errorf("429: RetryAfter %v, want 7s", e.RetryAfter)
			}
		}
	}
	if n := decoyHits.Load(); n != 0 {
		t.Fatalf("the redirect was followed (%d requests): the token went with it", n)
	}
}

// TestAnswers: the answer's size limit, a body cut short and a body that is not JSON keep
// their classification under vault/api.
func TestAnswers(t *testing.T) {
	var mode atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		switch mode.Load().(string) {
		case "huge":
			w.WriteHeader(200)
			io.WriteString(w, `{"data":{"x":"`+strings.Repeat("a", maxAnswerBytes)+`"}}`)
		case "cut":
			w.Header().Set("Content-Length", "4096")
			w.WriteHeader(200)
			io.WriteString(w, `{"data":{"tt`)
		case "garbage":
			w.WriteHeader(200)
			io.WriteString(w, `<html>proxy error</html>`)
		case "empty":
			w.WriteHeader(200)
		}
	}))
	t.Cleanup(srv.Close)
	c := newClient(t, srv.URL)
	ctx := context.Background()
	for _, tc := range []struct {
		mode, code string
		kind       effects.Kind
		msg        string
	}{
		{"huge", "BAO_ANSWER", effects.Permanent, "(HTTP 200): answer larger than 1048576 bytes"},
		{"cut", "CONNECTION_RESET", effects.Temporary, "was reset or cut short"},
		{"garbage", "BAO_ANSWER", effects.Permanent, "(HTTP 200): answer is not JSON"},
		{"empty", "BAO_ANSWER", effects.Permanent, "lookup-self answer has no data"},
	} {
		mode.Store(tc.mode)
		_, err := c.LookupSelf(ctx, tok)
		wantErr(t, err, tc.kind, tc.code, tc.msg)
	}
	mode.Store("empty")
	if err := c.RevokeSelf(ctx, tok); err != nil {
		t.Fatalf("revoke-self with an empty answer: %v", err)
	}
}

// TestTLS: the agent's TLS (its CA file, its server name) is what vault/api's requests use.
func TestTLS(t *testing.T) {
	f := &fakeBao{}
	srv := httptest.NewTLSServer(http.HandlerFunc(f.serve))
	t.Cleanup(srv.Close)
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	writePEM(t, caFile, srv.Certificate().Raw)
	client := func(serverName, ca string) *Client {
		hc, err := transport.HTTPClient(sysDialer{}, serverName, ca, 3*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		c, err := New(srv.URL, hc, 3*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	ctx := context.Background()
	if _, err := client("", caFile).Login(ctx, "jwt-tenancy", "see-env", grant); err != nil {
		t.Fatalf("with the CA: %v", err)
	}
	_, err := client("", "").Login(ctx, "jwt-tenancy", "see-env", grant)
	wantErr(t, err, effects.TLS, "TLS_UNKNOWN_CA", "check bao.ca_file")
	_, err = client("bao.elsewhere.example", caFile).Login(ctx, "jwt-tenancy", "see-env", grant)
	wantErr(t, err, effects.TLS, "TLS_NAME_MISMATCH", "not valid for bao.elsewhere.example")
	garbage := filepath.Join(t.TempDir(), "garbage.pem")
	os.WriteFile(garbage, []byte("not a certificate"), 0o600)
	_, err = client("", garbage).Login(ctx, "jwt-tenancy", "see-env", grant)
	wantErr(t, err, effects.TLS, "TLS_CA_FILE", "holds no PEM certificate")
	plain := newFakeBao(t)
	_, err = newClient(t, strings.Replace(plain.URL, "http:", "https:", 1)).Login(ctx, "jwt-tenancy", "see-env", grant)
	wantErr(t, err, effects.TLS, "TLS_HANDSHAKE", "did not answer TLS")
}
