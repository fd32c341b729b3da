// Package bao is the agent's OpenBao client (PROTOCOL.md §3): login with a deploy grant,
// lookup-self, renew-self, revoke-self and KV-v2 reads, each classified into a *effects.Error.
//
// The calls are vault/api's (Logical().WriteWithContext for the login, Auth().Token()'s
// LookupSelf/RenewSelf/RevokeSelf, Logical().ReadWithDataWithContext with a pinned version for
// KV), over the *http.Client package transport built (our dialer, our TLS), with vault/api's
// retries and redirects off: the tick decides retries. No VAULT_* environment variable changes
// a request: the client is built from a Config written here, never from DefaultConfig, and
// every request carries only X-Vault-Request and the caller's token (see apiClient and only).
//
// It may not open sockets itself, log, or put a token, grant or KV value in an error.
package bao

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/vault/api"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/internal/sanitize"
	"github.com/tikali/monky-deployd/internal/vocab"
	"github.com/tikali/monky-deployd/transport"
)

const (
	maxAnswerBytes = 1 << 20
	maxErrorMsg    = 512
	mask           = "[REDACTED]" // the redactor's mask
)

// Client speaks OpenBao's HTTP API through vault/api. It implements effects.Bao.
type Client struct {
	api       *api.Client // token-less; each call works on a shallow copy (see call)
	hostport  string      // for error messages
	transport string
}

var _ effects.Bao = (*Client)(nil)

// New returns a client for OpenBao at addr (e.g. https://bao.cbs.tikali.net:8200) over hc.
// timeout bounds each call (0: hc's own). Redirects are not followed: X-Vault-Token would go
// with them. Call it at start-up: see apiClient.
func New(addr string, hc *http.Client, timeout time.Duration) (*Client, error) {
	u, err := url.Parse(strings.TrimSpace(addr))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("bao: addr %q is not an http(s) URL with a host", addr)
	}
	u.Path, u.RawPath, u.RawQuery, u.Fragment = strings.TrimSuffix(u.Path, "/"), "", "", ""
	if hc == nil {
		return nil, errors.New("bao: no http client")
	}
	c := *hc
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	next := hc.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	c.Transport = wire{next: next}
	cl, err := apiClient(&api.Config{
		Address:          u.String(),
		HttpClient:       &c,
		Timeout:          timeout,
		MaxRetries:       0,
		CheckRetry:       noRetry,
		DisableRedirects: true,
	})
	if err != nil {
		return nil, fmt.Errorf("bao: %w", err)
	}
	return &Client{api: cl, hostport: transport.HostPort(u), transport: transport.Name(hc)}, nil
}

// envMu serialises apiClient's hiding of the VAULT_* variables.
var envMu sync.Mutex

// apiClient builds vault/api's client from cfg and nothing else.
//
// api.NewClient always runs DefaultConfig, which reads every VAULT_* variable into a Config
// that is then thrown away (cfg is complete), but fails outright on a malformed one
// (VAULT_MAX_RETRIES=x, VAULT_CACERT=/missing, VAULT_HEADERS=garbage). When it fails so, the
// VAULT_* variables are hidden from the process for the length of the call and put back.
// What NewClient itself takes from the environment (VAULT_TOKEN, VAULT_NAMESPACE,
// VAULT_HEADERS) is undone here, and VAULT_WRAP_TTL, read at each request, is shut out.
func apiClient(cfg *api.Config) (*api.Client, error) {
	cl, err := api.NewClient(cfg)
	if err != nil {
		envMu.Lock()
		restore := hideVaultEnv()
		cl, err = api.NewClient(cfg)
		restore()
		envMu.Unlock()
		if err != nil {
			return nil, err
		}
	}
	cl.ClearToken()
	cl.ClearNamespace()
	cl.SetHeaders(http.Header{api.RequestHeaderName: {"true"}})
	cl.SetWrappingLookupFunc(func(string, string) string { return "" })
	cl.SetMFACreds(nil)
	return cl, nil
}

// hideVaultEnv unsets every VAULT_* variable and returns what puts them back.
func hideVaultEnv() (restore func()) {
	saved := map[string]string{}
	for _, kv := range os.Environ() {
		if k, v, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(k, "VAULT_") {
			saved[k] = v
			os.Unsetenv(k)
		}
	}
	return func() {
		for k, v := range saved {
			os.Setenv(k, v)
		}
	}
}

// noRetry is vault/api's CheckRetry: never. The next tick is the retry.
func noRetry(context.Context, *http.Response, error) (bool, error) { return false, nil }

// only is the request callback of every call: the request carries X-Vault-Request and token
// (none when empty) and nothing else vault/api might add (namespace, wrapping, MFA, policy
// override, extra headers).
func only(token string) api.RequestCallback {
	return func(r *api.Request) {
		r.ClientToken = token
		r.Headers = http.Header{api.RequestHeaderName: {"true"}}
		r.WrapTTL, r.MFAHeaderVals, r.PolicyOverride, r.HCPCookie = "", nil, false, nil
	}
}

// exchange is what one call saw on the wire. vault/api's errors keep neither the answer's
// headers (Retry-After, Location) nor a 404's body, and the classification needs both.
type exchange struct {
	status int
	header http.Header
	raw    []byte
	tooBig bool
}

type exchangeKey struct{}

// wire sits between vault/api and the agent's transport. It reads each answer whole (at most
// maxAnswerBytes), so that a body cut short fails the call as a transport error, and records
// it in the call's exchange.
type wire struct{ next http.RoundTripper }

func (w wire) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := w.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes+1))
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	x, _ := req.Context().Value(exchangeKey{}).(*exchange)
	if x == nil {
		x = &exchange{} // a request made outside call: nothing to record
	}
	x.status, x.header, x.tooBig = resp.StatusCode, resp.Header, len(raw) > maxAnswerBytes
	if x.tooBig {
		return nil, errAnswerTooBig
	}
	x.raw = raw
	resp.Body = io.NopCloser(bytes.NewReader(raw))
	resp.ContentLength = int64(len(raw))
	return resp, nil
}

var errAnswerTooBig = errors.New("answer too large")

// call runs one vault/api call f on a copy of the client that sends token, and classifies
// the outcome from the exchange: no answer is the transport's error, a non-2xx answer is
// statusErr's, a 2xx answer vault/api could not parse is BAO_ANSWER. secret (the token or the
// grant) is masked out of every message.
func (c *Client) call(ctx context.Context, op, token, secret string, f func(context.Context, *api.Client) (*api.Secret, error)) (*api.Secret, error) {
	x := &exchange{}
	s, err := f(context.WithValue(ctx, exchangeKey{}, x), c.api.WithRequestCallbacks(only(token)))
	switch {
	case x.status == 0 && err != nil:
		return nil, scrub(effects.Classify(op, c.hostport, c.transport, err), secret)
	case x.status == 0:
		return nil, &effects.Error{Op: op, Kind: effects.Permanent, Code: vocab.BaoAnswer, Msg: "no answer"}
	case x.tooBig:
		return nil, &effects.Error{Op: op, Kind: effects.Permanent, Code: vocab.BaoAnswer, Status: x.status,
			Msg: fmt.Sprintf("answer larger than %d bytes", maxAnswerBytes)}
	case x.status < 200 || x.status > 299:
		return nil, scrub(statusErr(op, x.status, x.header, x.raw), secret)
	case len(bytes.TrimSpace(x.raw)) == 0:
		return nil, nil // 204
	case err != nil:
		return nil, &effects.Error{Op: op, Kind: effects.Permanent, Code: vocab.BaoAnswer, Status: x.status,
			Msg: "answer is not JSON"}
	}
	return s, nil
}

// Login exchanges a deploy grant for a token: auth/<mount>/login {role, jwt}.
func (c *Client) Login(ctx context.Context, mount, role, jwt string) (effects.Token, error) {
	const op = "bao login"
	if err := checkSegments(op, mount); err != nil {
		return effects.Token{}, err
	}
	s, err := c.call(ctx, op, "", jwt, func(ctx context.Context, cl *api.Client) (*api.Secret, error) {
		return cl.Logical().WriteWithContext(ctx, "auth/"+mount+"/login", map[string]any{"role": role, "jwt": jwt})
	})
	if err != nil {
		return effects.Token{}, err
	}
	if s == nil || s.Auth == nil || s.Auth.ClientToken == "" {
		return effects.Token{}, &effects.Error{Op: op, Kind: effects.Permanent, Code: vocab.BaoAnswer,
			Msg: "login answer has no auth.client_token"}
	}
	return effects.Token{
		Value:     s.Auth.ClientToken,
		TTL:       time.Duration(s.Auth.LeaseDuration) * time.Second,
		Renewable: s.Auth.Renewable,
		Meta:      lines(s.Auth.Metadata),
	}, nil
}

// LookupSelf reads the token's own record.
func (c *Client) LookupSelf(ctx context.Context, token string) (effects.TokenInfo, error) {
	const op = "bao lookup-self"
	s, err := c.call(ctx, op, token, token, func(ctx context.Context, cl *api.Client) (*api.Secret, error) {
		return cl.Auth().Token().LookupSelfWithContext(ctx)
	})
	if err != nil {
		return effects.TokenInfo{}, err
	}
	if s == nil || s.Data == nil {
		return effects.TokenInfo{}, &effects.Error{Op: op, Kind: effects.Permanent, Code: vocab.BaoAnswer,
			Msg: "lookup-self answer has no data"}
	}
	d := s.Data
	info := effects.TokenInfo{
		TTL:         seconds(d["ttl"]),
		ExpireTime:  timeOf(d["expire_time"]),
		IssueTime:   timeOf(d["issue_time"]),
		ExplicitMax: seconds(d["explicit_max_ttl"]),
	}
	if meta, ok := d["meta"].(map[string]any); ok {
		envID, _ := meta["env_id"].(string)
		jti, _ := meta["grant_jti"].(string)
		info.EnvID, info.GrantJTI = sanitize.Line(envID), sanitize.Line(jti)
	}
	return info, nil
}

// RenewSelf renews the token by increment (whole seconds, rounded up; 0: the server's
// default) and returns its new ttl.
func (c *Client) RenewSelf(ctx context.Context, token string, increment time.Duration) (time.Duration, error) {
	const op = "bao renew-self"
	s, err := c.call(ctx, op, token, token, func(ctx context.Context, cl *api.Client) (*api.Secret, error) {
		return cl.Auth().Token().RenewSelfWithContext(ctx, incrementSeconds(increment))
	})
	if err != nil {
		return 0, err
	}
	if s == nil || s.Auth == nil {
		return 0, &effects.Error{Op: op, Kind: effects.Permanent, Code: vocab.BaoAnswer,
			Msg: "renew-self answer has no auth"}
	}
	return time.Duration(s.Auth.LeaseDuration) * time.Second, nil
}

// RevokeSelf revokes the token.
func (c *Client) RevokeSelf(ctx context.Context, token string) error {
	_, err := c.call(ctx, "bao revoke-self", token, token, func(ctx context.Context, cl *api.Client) (*api.Secret, error) {
		return nil, cl.Auth().Token().RevokeSelfWithContext(ctx, token)
	})
	return err
}

// ReadKV reads key from the KV-v2 path (mount included, e.g. monky/data/env-qa-02/see/gemini)
// at version (0: latest). A deleted or destroyed version, and a missing key, are errors that
// name the path and key, never a value. A value that is not a string is returned as JSON.
func (c *Client) ReadKV(ctx context.Context, token, path, key string, version int) (string, error) {
	const op = "bao kv read"
	path = strings.Trim(path, "/")
	if err := checkSegments(op, path); err != nil {
		return "", err
	}
	if key == "" {
		key = "value"
	}
	where := path
	var q map[string][]string
	if version > 0 {
		q = map[string][]string{"version": {strconv.Itoa(version)}}
		where += " version " + strconv.Itoa(version)
	}
	s, err := c.call(ctx, op, token, token, func(ctx context.Context, cl *api.Client) (*api.Secret, error) {
		return cl.Logical().ReadWithDataWithContext(ctx, path, q)
	})
	var ee *effects.Error
	if errors.As(err, &ee) && ee.Status == http.StatusNotFound && ee.Code == vocab.KVVersionDeleted {
		ee.Msg = where + " is deleted or destroyed"
		return "", ee
	}
	if errors.As(err, &ee) && ee.Status == http.StatusNotFound {
		// OpenBao answers a KV-v2 path that holds no secret with 404 (and no words): the
		// manifest names a secret that was never set, or a wrong path
		msg := where + " has no data"
		if ee.Msg != "" {
			msg += " (OpenBao: " + ee.Msg + ")"
		}
		ee.Code, ee.Msg = vocab.KVNotFound, msg
		return "", ee
	}
	if err != nil {
		return "", err
	}
	if s == nil || s.Data == nil {
		return "", &effects.Error{Op: op, Kind: effects.NotFound, Code: vocab.KVNotFound, Msg: where + " has no data"}
	}
	if deleted(s.Data) {
		return "", &effects.Error{Op: op, Kind: effects.NotFound, Code: vocab.KVVersionDeleted, Msg: where + " is deleted or destroyed"}
	}
	data, ok := s.Data["data"].(map[string]any)
	if !ok {
		return "", &effects.Error{Op: op, Kind: effects.Permanent, Code: vocab.BaoAnswer,
			Msg: where + " is not a KV-v2 secret (no data.data); is the path <mount>/data/…?"}
	}
	v, ok := data[key]
	if !ok || v == nil {
		keys := make([]string, 0, len(data))
		for k := range data {
			keys = append(keys, sanitize.Line(k))
		}
		sort.Strings(keys)
		return "", &effects.Error{Op: op, Kind: effects.Permanent, Code: vocab.KVKeyMissing,
			Msg: fmt.Sprintf("key %q is not in %s (keys: %s)", key, where, strings.Join(keys, ", "))}
	}
	if s, ok := v.(string); ok {
		return s, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "", &effects.Error{Op: op, Kind: effects.Permanent, Code: vocab.BaoAnswer, Msg: fmt.Sprintf("key %q of %s: unusable value", key, where)}
	}
	return string(b), nil
}

// deleted reports whether a KV-v2 answer's data is a deleted or destroyed version.
func deleted(d map[string]any) bool {
	md, _ := d["metadata"].(map[string]any)
	if md != nil {
		if dt, _ := md["deletion_time"].(string); dt != "" {
			return true
		}
		if b, _ := md["destroyed"].(bool); b {
			return true
		}
	}
	_, has := d["data"]
	return has && d["data"] == nil && md != nil
}

// statusErr maps an error answer: 400 at login BAO_LOGIN_REFUSED, 401/403
// BAO_PERMISSION_DENIED, 404 NotFound, 429 RateLimited, 5xx and 412 Temporary.
func statusErr(op string, status int, header http.Header, raw []byte) *effects.Error {
	words := errorWords(raw)
	e := &effects.Error{Op: op, Status: status, Msg: words}
	switch s := status; {
	case s == http.StatusBadRequest && op == "bao login":
		e.Kind, e.Code = effects.Permanent, vocab.BaoLoginRefused
		e.Hint = "the grant was refused: expired, superseded or for another role"
	case s == http.StatusUnauthorized || s == http.StatusForbidden:
		e.Kind, e.Code = effects.Permanent, vocab.BaoPermissionDenied
	case s == http.StatusNotFound:
		e.Kind, e.Code = effects.NotFound, vocab.BaoNotFound
		if s, err := api.ParseSecret(bytes.NewReader(raw)); err == nil && s != nil && s.Data != nil && deleted(s.Data) {
			e.Code = vocab.KVVersionDeleted
		}
	case s == http.StatusTooManyRequests:
		e.Kind, e.Code = effects.RateLimited, vocab.RateLimited
		if n, err := strconv.Atoi(strings.TrimSpace(header.Get("Retry-After"))); err == nil && n > 0 {
			e.RetryAfter = time.Duration(n) * time.Second
		}
	case s >= 500 || s == http.StatusPreconditionFailed:
		e.Kind = effects.Temporary
	case s >= 300 && s < 400:
		e.Kind = effects.Temporary
		e.Msg = fmt.Sprintf("redirected to %q (not followed; a standby node?)", header.Get("Location"))
	default:
		e.Kind, e.Code = effects.Permanent, vocab.BaoRequestRefused
	}
	return e
}

// errorWords is OpenBao's own `errors` list, or the plain body.
func errorWords(raw []byte) string {
	var er api.ErrorResponse
	if json.Unmarshal(raw, &er) == nil && len(er.Errors) > 0 {
		return clip(strings.Join(er.Errors, "; "))
	}
	if json.Valid(raw) {
		return ""
	}
	return clip(string(raw))
}

func scrub(e *effects.Error, secret string) *effects.Error {
	if e == nil || secret == "" || !strings.Contains(e.Error(), secret) {
		return e
	}
	c := *e
	c.Msg = strings.ReplaceAll(e.Msg, secret, mask)
	c.Hint = strings.ReplaceAll(e.Hint, secret, mask)
	if c.Err != nil && strings.Contains(c.Err.Error(), secret) {
		c.Err = errors.New(strings.ReplaceAll(c.Err.Error(), secret, mask))
	}
	return &c
}

// clip trims OpenBao's words to one short line, its control characters escaped as tenancy's
// are (sanitize.Line): they reach status, explain, the journal and the report.
func clip(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > maxErrorMsg {
		s = strings.ToValidUTF8(s[:maxErrorMsg], "") + "…"
	}
	return sanitize.Line(s)
}

// lines is a token's metadata from OpenBao with each value's control characters escaped: its
// env_id and grant_jti are recorded and shown by status and explain.
func lines(meta map[string]string) map[string]string {
	if meta == nil {
		return nil
	}
	out := make(map[string]string, len(meta))
	for k, v := range meta {
		out[k] = sanitize.Line(v)
	}
	return out
}

// checkSegments refuses an empty path or one with empty, "." or ".." segments.
func checkSegments(op, p string) error {
	if p == "" {
		return &effects.Error{Op: op, Kind: effects.Permanent, Code: vocab.BaoPath, Msg: "empty path"}
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return &effects.Error{Op: op, Kind: effects.Permanent, Code: vocab.BaoPath, Msg: fmt.Sprintf("path %q is not clean", p)}
		}
	}
	return nil
}

// incrementSeconds is d in whole seconds, rounded up, as renew-self's increment.
func incrementSeconds(d time.Duration) int {
	if d <= 0 {
		return 0
	}
	return int((d + time.Second - 1) / time.Second)
}

// seconds reads a JSON number (or numeric string) of seconds.
func seconds(v any) time.Duration {
	var n int64
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			n = i
		} else if f, err := x.Float64(); err == nil {
			n = int64(f)
		}
	case string:
		if i, err := strconv.ParseInt(x, 10, 64); err == nil {
			n = i
		} else if d, err := time.ParseDuration(x); err == nil {
			return d
		}
	case float64:
		n = int64(x)
	}
	if n < 0 {
		return 0
	}
	return time.Duration(n) * time.Second
}

// timeOf reads an RFC 3339 time; zero when absent or null.
func timeOf(v any) time.Time {
	s, _ := v.(string)
	if s == "" {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}
	}
	return t
}
