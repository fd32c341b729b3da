// Package bao is the agent's OpenBao client (PROTOCOL.md §3): login with a deploy grant,
// lookup-self, renew-self, revoke-self and KV-v2 reads, each classified into an *fault.Error.
//
// Every VAULT_* environment variable is ignored. vault/api's NewClient cannot be used for that:
// it always runs DefaultConfig, which reads VAULT_ADDR, VAULT_TOKEN, VAULT_NAMESPACE,
// VAULT_HEADERS, VAULT_WRAP_TTL and the rest, and fails outright on a malformed one
// (VAULT_MAX_RETRIES=x, VAULT_CACERT=/missing). So requests are made here, over the
// *http.Client package transport built (our dialer, our TLS), with no retries (the tick decides
// retries), and vault/api is used for the wire shapes: api.ParseSecret, api.Secret,
// api.ErrorResponse.
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
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/vault/api"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/effects/fault"
	"github.com/tikali/monky-deployd/transport"
)

const (
	maxAnswerBytes = 1 << 20
	maxErrorMsg    = 512
	mask           = "[REDACTED]" // the redactor's mask
)

// Client speaks OpenBao's HTTP API. It implements effects.Bao.
type Client struct {
	addr      *url.URL
	hc        *http.Client
	timeout   time.Duration
	transport string
}

var _ effects.Bao = (*Client)(nil)

// New returns a client for OpenBao at addr (e.g. https://bao.cbs.tikali.net:8200) over hc.
// timeout bounds each call (0: hc's own). Redirects are not followed: X-Vault-Token would go
// with them.
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
	return &Client{addr: u, hc: &c, timeout: timeout, transport: transport.Name(hc)}, nil
}

// Login exchanges a deploy grant for a token: POST auth/<mount>/login {role, jwt}.
func (c *Client) Login(ctx context.Context, mount, role, jwt string) (effects.Token, error) {
	if err := checkSegments("login", mount); err != nil {
		return effects.Token{}, err
	}
	body := map[string]string{"role": role, "jwt": jwt}
	s, err := c.do(ctx, "bao login", http.MethodPost, "auth/"+mount+"/login", "", body, nil, jwt)
	if err != nil {
		return effects.Token{}, err
	}
	if s == nil || s.Auth == nil || s.Auth.ClientToken == "" {
		return effects.Token{}, &fault.Error{Op: "bao login", Kind: fault.Permanent, Code: "BAO_ANSWER",
			Msg: "login answer has no auth.client_token"}
	}
	return effects.Token{
		Value:     s.Auth.ClientToken,
		TTL:       time.Duration(s.Auth.LeaseDuration) * time.Second,
		Renewable: s.Auth.Renewable,
		Meta:      s.Auth.Metadata,
	}, nil
}

// LookupSelf reads the token's own record.
func (c *Client) LookupSelf(ctx context.Context, token string) (effects.TokenInfo, error) {
	s, err := c.do(ctx, "bao lookup-self", http.MethodGet, "auth/token/lookup-self", token, nil, nil, token)
	if err != nil {
		return effects.TokenInfo{}, err
	}
	if s == nil || s.Data == nil {
		return effects.TokenInfo{}, &fault.Error{Op: "bao lookup-self", Kind: fault.Permanent, Code: "BAO_ANSWER",
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
		info.EnvID, _ = meta["env_id"].(string)
		info.GrantJTI, _ = meta["grant_jti"].(string)
	}
	return info, nil
}

// RenewSelf renews the token by increment and returns its new ttl.
func (c *Client) RenewSelf(ctx context.Context, token string, increment time.Duration) (time.Duration, error) {
	var body any = struct{}{}
	if increment > 0 {
		body = map[string]string{"increment": durationString(increment)}
	}
	s, err := c.do(ctx, "bao renew-self", http.MethodPost, "auth/token/renew-self", token, body, nil, token)
	if err != nil {
		return 0, err
	}
	if s == nil || s.Auth == nil {
		return 0, &fault.Error{Op: "bao renew-self", Kind: fault.Permanent, Code: "BAO_ANSWER",
			Msg: "renew-self answer has no auth"}
	}
	return time.Duration(s.Auth.LeaseDuration) * time.Second, nil
}

// RevokeSelf revokes the token.
func (c *Client) RevokeSelf(ctx context.Context, token string) error {
	_, err := c.do(ctx, "bao revoke-self", http.MethodPost, "auth/token/revoke-self", token, struct{}{}, nil, token)
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
	var q url.Values
	if version > 0 {
		q = url.Values{"version": {strconv.Itoa(version)}}
		where += " version " + strconv.Itoa(version)
	}
	s, err := c.do(ctx, op, http.MethodGet, path, token, nil, q, token)
	var ee *fault.Error
	if errors.As(err, &ee) && ee.Status == http.StatusNotFound && ee.Code == "KV_VERSION_DELETED" {
		ee.Msg = where + " is deleted or destroyed"
		return "", ee
	}
	if err != nil {
		return "", err
	}
	if s == nil || s.Data == nil {
		return "", &fault.Error{Op: op, Kind: fault.NotFound, Code: "KV_NOT_FOUND", Msg: where + " has no data"}
	}
	if deleted(s.Data) {
		return "", &fault.Error{Op: op, Kind: fault.NotFound, Code: "KV_VERSION_DELETED", Msg: where + " is deleted or destroyed"}
	}
	data, ok := s.Data["data"].(map[string]any)
	if !ok {
		return "", &fault.Error{Op: op, Kind: fault.Permanent, Code: "BAO_ANSWER",
			Msg: where + " is not a KV-v2 secret (no data.data); is the path <mount>/data/…?"}
	}
	v, ok := data[key]
	if !ok || v == nil {
		keys := make([]string, 0, len(data))
		for k := range data {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		return "", &fault.Error{Op: op, Kind: fault.Permanent, Code: "KV_KEY_MISSING",
			Msg: fmt.Sprintf("key %q is not in %s (keys: %s)", key, where, strings.Join(keys, ", "))}
	}
	if s, ok := v.(string); ok {
		return s, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "", &fault.Error{Op: op, Kind: fault.Permanent, Code: "BAO_ANSWER", Msg: fmt.Sprintf("key %q of %s: unusable value", key, where)}
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

// do makes one call. secret is masked out of every message (the token or the grant).
func (c *Client) do(ctx context.Context, op, method, path, token string, in any, q url.Values, secret string) (*api.Secret, error) {
	u := *c.addr
	u.Path = c.addr.Path + "/v1/" + path
	u.RawQuery = q.Encode()
	var rd io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return nil, &fault.Error{Op: op, Kind: fault.Permanent, Err: fmt.Errorf("encode request: %w", err)}
		}
		rd = bytes.NewReader(b)
	}
	if c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return nil, &fault.Error{Op: op, Kind: fault.Permanent, Err: err}
	}
	if token != "" {
		req.Header.Set("X-Vault-Token", token)
	}
	req.Header.Set("X-Vault-Request", "true")
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, scrub(transport.Classify(op, transport.HostPort(&u), c.transport, err), secret)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes+1))
	if err != nil {
		return nil, scrub(transport.Classify(op, transport.HostPort(&u), c.transport, err), secret)
	}
	if len(raw) > maxAnswerBytes {
		return nil, &fault.Error{Op: op, Kind: fault.Permanent, Code: "BAO_ANSWER", Status: resp.StatusCode,
			Msg: fmt.Sprintf("answer larger than %d bytes", maxAnswerBytes)}
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, scrub(statusErr(op, resp, raw), secret)
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, nil // 204
	}
	s, err := api.ParseSecret(bytes.NewReader(raw))
	if err != nil {
		return nil, &fault.Error{Op: op, Kind: fault.Permanent, Code: "BAO_ANSWER", Status: resp.StatusCode,
			Msg: "answer is not JSON"}
	}
	return s, nil
}

// statusErr maps an error answer: 400 at login BAO_LOGIN_REFUSED, 401/403
// BAO_PERMISSION_DENIED, 404 NotFound, 429 RateLimited, 5xx and 412 Temporary.
func statusErr(op string, resp *http.Response, raw []byte) *fault.Error {
	words := errorWords(raw)
	e := &fault.Error{Op: op, Status: resp.StatusCode, Msg: words}
	switch s := resp.StatusCode; {
	case s == http.StatusBadRequest && op == "bao login":
		e.Kind, e.Code = fault.Permanent, "BAO_LOGIN_REFUSED"
		e.Hint = "the grant was refused: expired, superseded or for another role"
	case s == http.StatusUnauthorized || s == http.StatusForbidden:
		e.Kind, e.Code = fault.Permanent, "BAO_PERMISSION_DENIED"
	case s == http.StatusNotFound:
		e.Kind, e.Code = fault.NotFound, "BAO_NOT_FOUND"
		if s, err := api.ParseSecret(bytes.NewReader(raw)); err == nil && s != nil && s.Data != nil && deleted(s.Data) {
			e.Code = "KV_VERSION_DELETED"
		}
	case s == http.StatusTooManyRequests:
		e.Kind = fault.RateLimited
		if n, err := strconv.Atoi(strings.TrimSpace(resp.Header.Get("Retry-After"))); err == nil && n > 0 {
			e.RetryAfter = time.Duration(n) * time.Second
		}
	case s >= 500 || s == http.StatusPreconditionFailed:
		e.Kind = fault.Temporary
	case s >= 300 && s < 400:
		e.Kind = fault.Temporary
		e.Msg = fmt.Sprintf("redirected to %q (not followed; a standby node?)", resp.Header.Get("Location"))
	default:
		e.Kind, e.Code = fault.Permanent, "BAO_REQUEST_REFUSED"
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

func scrub(e *fault.Error, secret string) *fault.Error {
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

func clip(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > maxErrorMsg {
		s = strings.ToValidUTF8(s[:maxErrorMsg], "") + "…"
	}
	return s
}

// checkSegments refuses an empty path or one with empty, "." or ".." segments.
func checkSegments(op, p string) error {
	if p == "" {
		return &fault.Error{Op: op, Kind: fault.Permanent, Code: "BAO_PATH", Msg: "empty path"}
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return &fault.Error{Op: op, Kind: fault.Permanent, Code: "BAO_PATH", Msg: fmt.Sprintf("path %q is not clean", p)}
		}
	}
	return nil
}

// durationString is d as OpenBao reads it: "24h", "90m" or "3600s".
func durationString(d time.Duration) string {
	switch {
	case d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	}
	return fmt.Sprintf("%ds", (d+time.Second-1)/time.Second)
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
