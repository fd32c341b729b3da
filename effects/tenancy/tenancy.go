// Package tenancy is the HTTP client of monky-tenancy's agent API (PROTOCOL.md §1): check-in,
// bundle download, lease and report, each classified into an *effects.Error.
//
// It may not open sockets itself (the *http.Client it is given comes from package transport),
// decide what the agent does next, or log. The bearer token never appears in an error.
package tenancy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/internal/sanitize"
	"github.com/tikali/monky-deployd/internal/version"
	"github.com/tikali/monky-deployd/internal/vocab"
	"github.com/tikali/monky-deployd/transport"
)

// Limits on what is read from tenancy besides a bundle.
const (
	maxAnswerBytes = 1 << 20  // a JSON answer
	maxErrorBytes  = 64 << 10 // an error body
	maxErrorMsg    = 512      // the far side's words kept in an error
	// DefaultMaxBundleBytes applies when FetchBundle is given no limit.
	DefaultMaxBundleBytes = 64 << 20
)

// mask replaces the bearer wherever the far side echoes it (the redactor's mask).
const mask = "[REDACTED]"

// Client speaks tenancy's agent API. It implements effects.Tenancy.
type Client struct {
	// Version is sent as User-Agent: monky-deployd/<Version>.
	Version string

	base      *url.URL
	baseErr   error
	hc        *http.Client
	transport string
	now       func() time.Time
}

var _ effects.Tenancy = (*Client)(nil)

// New returns a client for tenancy at baseURL (e.g. http://monky.tenancy.deploy:443) over hc,
// whose transport is named transportName in error messages ("": the name transport.HTTPClient
// recorded). now is the clock Retry-After dates
// are measured against. Redirects are never followed: the bearer goes to tenancy only.
func New(baseURL string, hc *http.Client, transportName string, now func() time.Time) *Client {
	if hc == nil {
		hc = &http.Client{}
	}
	if now == nil {
		now = time.Now
	}
	if transportName == "" {
		transportName = transport.Name(hc)
	}
	c := *hc
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	cl := &Client{Version: version.Version, hc: &c, transport: transportName, now: now}
	u, err := url.Parse(strings.TrimSpace(baseURL))
	switch {
	case err != nil:
		cl.baseErr = err
	case (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		cl.baseErr = fmt.Errorf("%q is not an http(s) URL with a host", baseURL)
	default:
		cl.base = u
	}
	return cl
}

// Checkin posts the heartbeat and returns tenancy's answer.
func (c *Client) Checkin(ctx context.Context, token string, req effects.CheckinRequest) (effects.CheckinResponse, error) {
	if req.Containers == nil {
		req.Containers = []effects.Container{}
	}
	body, _, err := c.call(ctx, "checkin", http.MethodPost, "/v1/agent/checkin", token, req, maxAnswerBytes)
	if err != nil {
		return effects.CheckinResponse{}, err
	}
	return decodeCheckin(body)
}

// FetchBundle downloads a bundle into dst, never holding it; more than limit bytes is
// BUNDLE_INVALID. On an error dst holds part of an answer: the caller discards it.
func (c *Client) FetchBundle(ctx context.Context, token, u string, limit int64, dst io.Writer) (effects.Bundle, error) {
	if limit <= 0 {
		limit = DefaultMaxBundleBytes
	}
	var n int64
	w := &keptWriter{w: dst}
	hdr, err := c.exchange(ctx, "bundle", http.MethodGet, u, token, nil, limit, func(body io.Reader) (err error) {
		n, err = io.Copy(w, body)
		return err
	})
	if w.err != nil {
		return effects.Bundle{}, w.err // the box's own write (a full disk), not the network's
	}
	if err != nil {
		return effects.Bundle{}, err
	}
	sha := hdr.Get("X-Bundle-Sha")
	if sha == "" {
		sha = hdr.Get("X-Bundle-Sha256")
	}
	return effects.Bundle{Size: n, HeaderSha: strings.ToLower(strings.TrimSpace(sha))}, nil
}

// keptWriter remembers the error of a write to the box's own file.
type keptWriter struct {
	w   io.Writer
	err error
}

func (k *keptWriter) Write(p []byte) (int, error) {
	n, err := k.w.Write(p)
	if err != nil && k.err == nil {
		k.err = err
	}
	return n, err
}

// Lease asks for a deploy grant (AgentLeaseOut).
func (c *Client) Lease(ctx context.Context, token, envID, reason string) (effects.Lease, error) {
	req := struct {
		EnvID  string `json:"env_id"`
		Reason string `json:"reason"`
	}{envID, reason}
	body, _, err := c.call(ctx, "lease", http.MethodPost, "/v1/agent/lease", token, req, maxAnswerBytes)
	if err != nil {
		return effects.Lease{}, err
	}
	return decodeLease(body)
}

// Report posts an apply's result; any 2xx is the acknowledgement.
func (c *Client) Report(ctx context.Context, token string, r effects.Report) error {
	if r.Containers == nil {
		r.Containers = []effects.Container{}
	}
	_, _, err := c.call(ctx, "report", http.MethodPost, "/v1/agent/report", token, r, maxAnswerBytes)
	return err
}

// resolve joins a path (or a relative bundle_url) to the base URL; an absolute URL must point
// at tenancy itself, because the bearer goes with it.
func (c *Client) resolve(op, ref string) (*url.URL, error) {
	if c.baseErr != nil {
		return nil, &effects.Error{Op: op, Kind: effects.Permanent, Code: vocab.TenancyURL, Msg: "tenancy base URL: " + c.baseErr.Error()}
	}
	r, err := url.Parse(ref)
	if err != nil {
		return nil, &effects.Error{Op: op, Kind: effects.Permanent, Code: vocab.TenancyURL, Msg: fmt.Sprintf("bad URL %q", ref)}
	}
	if r.IsAbs() || r.Host != "" {
		if !strings.EqualFold(r.Host, c.base.Host) || (r.Scheme != "" && r.Scheme != c.base.Scheme) {
			return nil, &effects.Error{Op: op, Kind: effects.Permanent, Code: vocab.TenancyURL,
				Msg: fmt.Sprintf("refusing to send the bearer to %s://%s: tenancy is %s", r.Scheme, r.Host, c.base.Host)}
		}
		u := *c.base
		u.Path, u.RawPath, u.RawQuery = r.Path, r.RawPath, r.RawQuery
		return &u, nil
	}
	u := *c.base
	p := r.Path
	if !strings.HasPrefix(p, "/") {
		p = "/" + p
	}
	u.Path = strings.TrimSuffix(c.base.Path, "/") + p
	u.RawPath = ""
	u.RawQuery = r.RawQuery
	return &u, nil
}

// call does one request and returns the 2xx body (at most limit bytes) or a classified error.
func (c *Client) call(ctx context.Context, op, method, ref, token string, in any, limit int64) ([]byte, http.Header, error) {
	var body []byte
	hdr, err := c.exchange(ctx, op, method, ref, token, in, limit, func(r io.Reader) (err error) {
		body, err = io.ReadAll(r)
		return err
	})
	return body, hdr, err
}

// exchange sends the request and hands a 2xx answer's body to read, cut at limit bytes: an
// answer longer than that is an error (BUNDLE_INVALID for a bundle) once read has had limit.
func (c *Client) exchange(ctx context.Context, op, method, ref, token string, in any, limit int64, read func(io.Reader) error) (http.Header, error) {
	u, err := c.resolve(op, ref)
	if err != nil {
		return nil, err
	}
	var rd io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return nil, &effects.Error{Op: op, Kind: effects.Permanent, Err: fmt.Errorf("encode request: %w", err)}
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return nil, &effects.Error{Op: op, Kind: effects.Permanent, Err: err}
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("User-Agent", "monky-deployd/"+c.Version)
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if op == "bundle" {
		req.Header.Set("Accept", "application/x-tar, application/gzip")
	} else {
		req.Header.Set("Accept", "application/json")
	}
	hostport := transport.HostPort(u)
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, c.transportErr(op, hostport, err, token)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBytes))
		return nil, c.statusErr(op, resp, raw, token)
	}
	lr := &io.LimitedReader{R: resp.Body, N: limit + 1}
	if err := read(lr); err != nil {
		return nil, c.transportErr(op, hostport, err, token)
	}
	if lr.N == 0 {
		if op == "bundle" {
			return nil, &effects.Error{Op: op, Kind: effects.Permanent, Status: resp.StatusCode, Code: vocab.BundleInvalid,
				Msg: fmt.Sprintf("bundle larger than max_bundle_bytes (%d bytes)", limit)}
		}
		return nil, &effects.Error{Op: op, Kind: effects.Permanent, Status: resp.StatusCode,
			Msg: fmt.Sprintf("answer larger than %d bytes", limit)}
	}
	return resp.Header, nil
}

func (c *Client) transportErr(op, hostport string, err error, token string) error {
	e := effects.Classify(op, hostport, c.transport, err)
	if token != "" && (strings.Contains(e.Msg, token) || strings.Contains(e.Error(), token)) {
		cp := *e
		cp.Msg = strings.ReplaceAll(cp.Error(), token, mask)
		cp.Err = errors.New(cp.Msg)
		return &cp
	}
	return e
}

// statusErr maps a non-2xx answer per PROTOCOL.md §1.
func (c *Client) statusErr(op string, resp *http.Response, raw []byte, token string) error {
	code, msg := decodeErrorBody(raw)
	if token != "" {
		msg = strings.ReplaceAll(msg, token, mask)
		code = strings.ReplaceAll(code, token, mask)
	}
	e := &effects.Error{Op: op, Status: resp.StatusCode, Code: vocab.Code(code), Msg: msg} // tenancy's own code, or one of the vocabulary's
	switch s := resp.StatusCode; {
	case s == http.StatusUnauthorized:
		e.Kind = effects.Unauthenticated
		if e.Code == "" {
			e.Code = vocab.AgentUnauthenticated
		}
		e.Hint = "the bearer was refused (grant superseded by a kit re-reveal or retire, or the token revoked)"
	case s == http.StatusForbidden:
		e.Kind = effects.EnvMismatch
		if e.Code == "" {
			e.Code = vocab.AgentEnvMismatch
		}
		e.Hint = "the token is pinned to another env than config.yaml says"
	case s == http.StatusNotFound:
		e.Kind = effects.NotFound
	case s == http.StatusTooManyRequests:
		e.Kind = effects.RateLimited
		if e.Code == "" {
			e.Code = vocab.RateLimited
		}
		e.RetryAfter = retryAfter(resp.Header.Get("Retry-After"), c.now())
	case s >= 500:
		e.Kind = effects.Temporary
		if code != "" {
			// tenancy's own answer (its code in its body); a bare 5xx may be a proxy or router
			// on the way ("upstream connect error"), which is no word of tenancy's
			e.Reason = vocab.ReasonTenancy5xx
		}
	case s >= 300 && s < 400:
		e.Kind = effects.Permanent
		e.Msg = fmt.Sprintf("unexpected redirect to %q (not followed)", resp.Header.Get("Location"))
	default:
		e.Kind = effects.Permanent
	}
	return e
}

// retryAfter reads Retry-After as seconds or an HTTP date (relative to now); 0 when absent.
func retryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n < 0 {
			return 0
		}
		return time.Duration(min(n, int64(24*3600))) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return d
		}
	}
	return 0
}

// decodeErrorBody reads {"detail": {"code","message"}}, {"detail": "text"}, top-level
// {"code","message"}, or plain text (code "").
func decodeErrorBody(raw []byte) (code, msg string) {
	var doc struct {
		Detail  json.RawMessage `json:"detail"`
		Code    any             `json:"code"`
		Message any             `json:"message"`
	}
	if json.Unmarshal(raw, &doc) == nil {
		var d struct {
			Code    any `json:"code"`
			Message any `json:"message"`
		}
		var s string
		switch {
		case len(doc.Detail) > 0 && json.Unmarshal(doc.Detail, &d) == nil && (d.Code != nil || d.Message != nil):
			return str(d.Code), clip(str(d.Message))
		case len(doc.Detail) > 0 && json.Unmarshal(doc.Detail, &s) == nil:
			return str(doc.Code), clip(s)
		case doc.Code != nil || doc.Message != nil:
			return str(doc.Code), clip(str(doc.Message))
		case len(doc.Detail) > 0 && string(doc.Detail) != "null":
			return "", clip(string(doc.Detail))
		}
	}
	return "", clip(string(raw))
}

// str is a code or message from tenancy as one line, its control characters escaped.
func str(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return sanitize.Line(x)
	}
	b, _ := json.Marshal(v)
	return sanitize.Line(string(b))
}

// clip trims the far side's words to one short line, its control characters escaped.
func clip(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > maxErrorMsg {
		s = strings.ToValidUTF8(s[:maxErrorMsg], "") + "…"
	}
	return sanitize.Line(s)
}
