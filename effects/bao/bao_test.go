package bao

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/internal/testkit"
	"github.com/tikali/monky-deployd/transport"
)

const (
	grant    = "eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJhZ2VudDplbnYtcWEtMDIifQ.c2ln"
	tok      = "s.AgentTokenValue0123"
	kvSecret = "GEMINI-SECRET-VALUE-v3"
)

type call struct {
	Method, Path, Query string
	Header              http.Header
	Body                map[string]any
}

// fakeBao speaks OpenBao's JSON shapes for the calls the agent makes.
type fakeBao struct {
	*httptest.Server
	mu    sync.Mutex
	calls []call
}

func newFakeBao(t *testing.T) *fakeBao {
	t.Helper()
	f := &fakeBao{}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeBao) last() call {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.calls) == 0 {
		return call{}
	}
	return f.calls[len(f.calls)-1]
}

func reply(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	io.WriteString(w, body)
}

func (f *fakeBao) serve(w http.ResponseWriter, r *http.Request) {
	c := call{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Header: r.Header.Clone()}
	b, _ := io.ReadAll(r.Body)
	json.Unmarshal(b, &c.Body)
	f.mu.Lock()
	f.calls = append(f.calls, c)
	f.mu.Unlock()

	authed := r.Header.Get("X-Vault-Token") == tok
	denied := `{"errors":["permission denied"]}`
	write := r.Method == "PUT" || r.Method == "POST" // OpenBao takes either for a write
	switch {
	case write && r.URL.Path == "/v1/auth/jwt-tenancy/login":
		if c.Body["jwt"] != grant || c.Body["role"] != "see-env" {
			reply(w, 400, `{"errors":["error validating token: token is expired"]}`)
			return
		}
		reply(w, 200, `{"request_id":"r","auth":{"client_token":"`+tok+`","accessor":"a","policies":["see-env"],
			"metadata":{"env_id":"env-qa-02","grant_jti":"jti-1","role":"see-env"},"lease_duration":86400,"renewable":true}}`)
	case !authed:
		reply(w, 403, denied)
	case r.Method == "GET" && r.URL.Path == "/v1/auth/token/lookup-self":
		reply(w, 200, `{"data":{"ttl":3599,"expire_time":"2026-11-30T14:00:00.123456Z","issue_time":"2026-11-29T14:00:00Z",
			"explicit_max_ttl":2592000,"meta":{"env_id":"env-qa-02","grant_jti":"jti-1"},"policies":["see-env"]}}`)
	case write && r.URL.Path == "/v1/auth/token/renew-self":
		if c.Body["increment"] != float64(86400) {
			reply(w, 400, `{"errors":["bad increment"]}`)
			return
		}
		reply(w, 200, `{"auth":{"client_token":"`+tok+`","lease_duration":86400,"renewable":true}}`)
	case write && r.URL.Path == "/v1/auth/token/revoke-self":
		w.WriteHeader(204)
	case r.Method == "GET" && r.URL.Path == "/v1/monky/data/env-qa-02/see/gemini":
		switch r.URL.Query().Get("version") {
		case "", "4":
			reply(w, 200, `{"data":{"data":{"value":"latest-v4","other":"o"},"metadata":{"version":4,"deletion_time":"","destroyed":false}}}`)
		case "3":
			reply(w, 200, `{"data":{"data":{"value":"`+kvSecret+`","alt":"a"},"metadata":{"version":3,"deletion_time":"","destroyed":false}}}`)
		case "2": // Vault's answer for a soft-deleted version
			reply(w, 404, `{"data":{"data":null,"metadata":{"version":2,"deletion_time":"2026-11-01T00:00:00Z","destroyed":false}}}`)
		case "1": // a destroyed version, as some servers answer it
			reply(w, 200, `{"data":{"data":null,"metadata":{"version":1,"deletion_time":"","destroyed":true}}}`)
		default:
			reply(w, 404, `{"errors":[]}`)
		}
	case r.Method == "GET" && r.URL.Path == "/v1/monky/data/env-qa-02/see/registry":
		reply(w, 200, `{"data":{"data":{"value":{"registry":"harbor.tikali.net","username":"robot","password":"p:w"}},"metadata":{"version":1}}}`)
	case r.URL.Path == "/v1/monky/data/env-qa-02/see/sealed":
		reply(w, 503, `{"errors":["Vault is sealed"]}`)
	case strings.HasPrefix(r.URL.Path, "/v1/monky/data/env-qa-03/"):
		reply(w, 403, denied)
	default:
		reply(w, 404, `{"errors":[]}`)
	}
}

func newClient(t *testing.T, addr string) *Client {
	t.Helper()
	hc, err := transport.HTTPClient(sysDialer{}, "", "", 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(addr, hc, 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

type sysDialer struct{}

func (sysDialer) Name() string { return "system" }
func (sysDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}

func wantErr(t *testing.T, err error, kind effects.Kind, code, msg string) {
	t.Helper()
	e := testkit.ErrorAs[*effects.Error](t, err)
	if e.Kind != kind || string(e.Code) != code {
		t.Fatalf("kind %v code %q, want %v %q: %v", e.Kind, e.Code, kind, code, err)
	}
	if !strings.Contains(err.Error(), msg) {
		t.Fatalf("message %q lacks %q", err, msg)
	}
	for _, secret := range []string{grant, tok, kvSecret, "latest-v4", "p:w"} {
		if strings.Contains(err.Error(), secret) {
			t.Fatalf("a secret leaked into %q", err)
		}
	}
}

func TestLoginLookupRenewRevoke(t *testing.T) {
	f := newFakeBao(t)
	c := newClient(t, f.URL)
	ctx := context.Background()

	got, err := c.Login(ctx, "jwt-tenancy", "see-env", grant)
	if err != nil {
		t.Fatal(err)
	}
	if got.Value != tok || got.TTL != 24*time.Hour || !got.Renewable || got.Meta["env_id"] != "env-qa-02" || got.Meta["grant_jti"] != "jti-1" {
		t.Fatalf("token %+v", got)
	}
	if h := f.last().Header; h.Get("X-Vault-Token") != "" {
		t.Fatal("login sent a token")
	}

	info, err := c.LookupSelf(ctx, tok)
	if err != nil {
		t.Fatal(err)
	}
	want := effects.TokenInfo{
		TTL:         3599 * time.Second,
		ExpireTime:  time.Date(2026, 11, 30, 14, 0, 0, 123456000, time.UTC),
		IssueTime:   time.Date(2026, 11, 29, 14, 0, 0, 0, time.UTC),
		ExplicitMax: 30 * 24 * time.Hour,
		EnvID:       "env-qa-02",
		GrantJTI:    "jti-1",
	}
	if !info.ExpireTime.Equal(want.ExpireTime) || !info.IssueTime.Equal(want.IssueTime) {
		t.Fatalf("times %v %v", info.ExpireTime, info.IssueTime)
	}
	info.ExpireTime, info.IssueTime, want.ExpireTime, want.IssueTime = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	if info != want {
		t.Fatalf("lookup-self %+v, want %+v", info, want)
	}

	ttl, err := c.RenewSelf(ctx, tok, 24*time.Hour)
	if err != nil || ttl != 24*time.Hour {
		t.Fatalf("renew-self %v %v", ttl, err)
	}
	if err := c.RevokeSelf(ctx, tok); err != nil {
		t.Fatal(err)
	}
	if l := f.last(); l.Method != "PUT" || l.Path != "/v1/auth/token/revoke-self" || l.Header.Get("X-Vault-Token") != tok {
		t.Fatalf("revoke call %+v", l)
	}
}

func TestErrors(t *testing.T) {
	f := newFakeBao(t)
	c := newClient(t, f.URL)
	ctx := context.Background()

	_, err := c.Login(ctx, "jwt-tenancy", "see-env", grant+"x")
	wantErr(t, err, effects.Permanent, "BAO_LOGIN_REFUSED", "bao login: BAO_LOGIN_REFUSED (HTTP 400): error validating token: token is expired")

	_, err = c.LookupSelf(ctx, "s.other")
	wantErr(t, err, effects.Permanent, "BAO_PERMISSION_DENIED", "permission denied")

	_, err = c.ReadKV(ctx, tok, "monky/data/env-qa-03/see/x", "value", 0)
	wantErr(t, err, effects.Permanent, "BAO_PERMISSION_DENIED", "(HTTP 403)")

	// a secret never set: OpenBao's 404 read as what it means for a KV read
	_, err = c.ReadKV(ctx, tok, "monky/data/env-qa-02/see/nothing", "value", 0)
	wantErr(t, err, effects.NotFound, "KV_NOT_FOUND", "(HTTP 404): monky/data/env-qa-02/see/nothing has no data")

	_, err = c.ReadKV(ctx, tok, "monky/data/env-qa-02/see/sealed", "value", 0)
	wantErr(t, err, effects.Temporary, "", "Vault is sealed")

	_, err = c.ReadKV(ctx, tok, "monky/data/../see/x", "value", 0)
	wantErr(t, err, effects.Permanent, "BAO_PATH", "not clean")

	l, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := l.Addr().String()
	l.Close()
	_, err = newClient(t, "http://"+dead).Login(ctx, "jwt-tenancy", "see-env", grant)
	wantErr(t, err, effects.Temporary, "CONNECTION_REFUSED", "nothing listens at "+dead+" (transport system)")
}

func TestReadKV(t *testing.T) {
	f := newFakeBao(t)
	c := newClient(t, f.URL)
	ctx := context.Background()

	v, err := c.ReadKV(ctx, tok, "monky/data/env-qa-02/see/gemini", "value", 3)
	if err != nil || v != kvSecret {
		t.Fatalf("version 3: %q %v", v, err)
	}
	if l := f.last(); l.Path != "/v1/monky/data/env-qa-02/see/gemini" || l.Query != "version=3" || l.Header.Get("X-Vault-Token") != tok {
		t.Fatalf("call %+v", l)
	}
	if v, err = c.ReadKV(ctx, tok, "monky/data/env-qa-02/see/gemini", "", 0); err != nil || v != "latest-v4" {
		t.Fatalf("latest with default key: %q %v", v, err)
	}
	if f.last().Query != "" {
		t.Fatalf("version 0 sent a query: %q", f.last().Query)
	}
	v, err = c.ReadKV(ctx, tok, "monky/data/env-qa-02/see/registry", "value", 1)
	var reg map[string]string
	if err != nil || json.Unmarshal([]byte(v), &reg) != nil || reg["password"] != "p:w" {
		t.Fatalf("object value: %q %v", v, err)
	}

	_, err = c.ReadKV(ctx, tok, "monky/data/env-qa-02/see/gemini", "value", 2)
	wantErr(t, err, effects.NotFound, "KV_VERSION_DELETED", "monky/data/env-qa-02/see/gemini version 2 is deleted or destroyed")
	_, err = c.ReadKV(ctx, tok, "monky/data/env-qa-02/see/gemini", "value", 1)
	wantErr(t, err, effects.NotFound, "KV_VERSION_DELETED", "version 1 is deleted or destroyed")
	_, err = c.ReadKV(ctx, tok, "monky/data/env-qa-02/see/gemini", "api_key", 3)
	wantErr(t, err, effects.Permanent, "KV_KEY_MISSING", `key "api_key" is not in monky/data/env-qa-02/see/gemini version 3 (keys: alt, value)`)
}

func TestIncrementSeconds(t *testing.T) {
	for d, want := range map[time.Duration]int{24 * time.Hour: 86400, 90 * time.Minute: 5400, 1500 * time.Millisecond: 2, 0: 0, -time.Second: 0} {
		if got := incrementSeconds(d); got != want {
			t.Errorf("%v → %d, want %d", d, got, want)
		}
	}
}

func TestNewRefusesBadAddr(t *testing.T) {
	for _, a := range []string{"", "bao.cbs.tikali.net:8200", "ftp://x"} {
		if _, err := New(a, &http.Client{}, 0); err == nil {
			t.Errorf("New(%q) accepted", a)
		}
	}
}

// OpenBao's own words — an error's text, a secret's key names, a token's metadata — reach
// status, explain, the journal and the report with their control characters escaped, as
// tenancy's do: no raw ESC, no U+202E that reorders what a terminal shows.
func TestOpenBaoWordsAreEscaped(t *testing.T) {
	const hostile = "\x1b[2J\u202edenied\x07"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/auth/jwt-tenancy/login":
			reply(w, 200, `{"auth":{"client_token":"`+tok+`","metadata":{"env_id":"env\u001b[31m-qa","grant_jti":"j\u202e1"},"lease_duration":60}}`)
		case "/v1/auth/token/lookup-self":
			reply(w, 200, `{"data":{"ttl":60,"meta":{"env_id":"env\u001b[31m-qa","grant_jti":"j\u202e1"}}}`)
		case "/v1/monky/data/env-qa-02/see/keys":
			reply(w, 200, `{"data":{"data":{"\u001b]0;pwned\u0007":"v"},"metadata":{"version":1}}}`)
		default:
			reply(w, 403, `{"errors":["`+strings.ReplaceAll(strings.ReplaceAll(hostile, "\x1b", `\u001b`), "\x07", `\u0007`)+`"]}`)
		}
	}))
	t.Cleanup(srv.Close)
	c := newClient(t, srv.URL)
	ctx := context.Background()
	raw := func(what, s string) {
		t.Helper()
		if strings.ContainsAny(s, "\x1b\x07\u202e") {
			t.Errorf("%s holds a raw control character: %q", what, s)
		}
	}
	_, err := c.ReadKV(ctx, tok, "monky/data/env-qa-02/see/denied", "value", 0)
	wantErr(t, err, effects.Permanent, "BAO_PERMISSION_DENIED", `\x1b[2J\u202edenied\a`)
	raw("the error", err.Error())
	_, err = c.ReadKV(ctx, tok, "monky/data/env-qa-02/see/keys", "value", 0)
	wantErr(t, err, effects.Permanent, "KV_KEY_MISSING", `\x1b]0;pwned\a`)
	raw("the error", err.Error())
	got, err := c.Login(ctx, "jwt-tenancy", "see-env", grant)
	if err != nil {
		t.Fatal(err)
	}
	raw("the login's env_id", got.Meta["env_id"])
	raw("the login's grant_jti", got.Meta["grant_jti"])
	info, err := c.LookupSelf(ctx, tok)
	if err != nil {
		t.Fatal(err)
	}
	raw("lookup-self's env_id", info.EnvID)
	raw("lookup-self's grant_jti", info.GrantJTI)
}
