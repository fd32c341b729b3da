package sim

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/internal/bundle"
	"github.com/tikali/monky-deployd/internal/testkit"
)

const envA, envB = "env-qa-02", "env-qa-03"

type harness struct {
	t       *testing.T
	sim     *Sim
	clock   *testkit.Clock
	tenancy *httptest.Server
	bao     *httptest.Server
}

// newSim is New, failing the test on an error.
func newSim(t *testing.T, opts Options) *Sim {
	t.Helper()
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func newHarness(t *testing.T, opts Options) *harness {
	t.Helper()
	c := testkit.NewClock(testkit.Epoch)
	if opts.Now == nil {
		opts.Now = c.Now
	}
	opts.Logf = t.Logf
	s := newSim(t, opts)
	h := &harness{t: t, sim: s, clock: c}
	h.tenancy = httptest.NewServer(s.TenancyHandler())
	h.bao = httptest.NewServer(s.BaoHandler())
	t.Cleanup(h.tenancy.Close)
	t.Cleanup(h.bao.Close)
	s.SetBaoAddr(h.bao.URL)
	return h
}

type answer struct {
	status int
	header http.Header
	body   []byte
}

func (a answer) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(a.body, &m); err != nil {
		t.Fatalf("answer %d is not JSON: %v: %s", a.status, err, a.body)
	}
	return m
}

// code returns tenancy's detail.code of an error answer.
func (a answer) code(t *testing.T) string {
	t.Helper()
	d, _ := a.json(t)["detail"].(map[string]any)
	c, _ := d["code"].(string)
	return c
}

func do(t *testing.T, method, url string, hdr map[string]string, body any) answer {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return answer{resp.StatusCode, resp.Header, b}
}

func (h *harness) loginRaw(grant string) answer {
	return do(h.t, "POST", h.bao.URL+"/v1/auth/jwt-tenancy/login", nil, map[string]string{"role": "see-env", "jwt": grant})
}

func (h *harness) login(grant string) string {
	h.t.Helper()
	a := h.loginRaw(grant)
	if a.status != 200 {
		h.t.Fatalf("login: %d %s", a.status, a.body)
	}
	auth := a.json(h.t)["auth"].(map[string]any)
	return auth["client_token"].(string)
}

func (h *harness) tokenFor(env string) string {
	h.t.Helper()
	g, err := h.sim.MintGrant(env, time.Hour)
	if err != nil {
		h.t.Fatal(err)
	}
	return h.login(g)
}

func (h *harness) tenancyCall(method, path, tok string, body any) answer {
	h.t.Helper()
	return do(h.t, method, h.tenancy.URL+path, map[string]string{"Authorization": "Bearer " + tok}, body)
}

func (h *harness) checkin(tok, env, applied string) answer {
	h.t.Helper()
	return h.tenancyCall("POST", "/v1/agent/checkin", tok, effects.CheckinRequest{EnvID: env, AgentVersion: "1.0.0", AppliedSha: applied, Host: "box-1"})
}

func (h *harness) kv(tok, path string) answer {
	h.t.Helper()
	return do(h.t, "GET", h.bao.URL+"/v1/"+path, map[string]string{"X-Vault-Token": tok}, nil)
}

func TestLoginVerifiesGrant(t *testing.T) {
	h := newHarness(t, Options{})
	grant, err := h.sim.MintGrant(envA, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	a := h.loginRaw(grant)
	if a.status != 200 {
		t.Fatalf("login of a good grant: %d %s", a.status, a.body)
	}
	auth := a.json(t)["auth"].(map[string]any)
	tok := auth["client_token"].(string)
	if !strings.HasPrefix(tok, "s.") || len(tok) != 26 {
		t.Errorf("token shape %q, want s. + 24 chars", tok)
	}
	if auth["lease_duration"].(float64) != 86400 || auth["renewable"] != true {
		t.Errorf("auth = %v, want lease_duration 86400 renewable", auth)
	}
	md := auth["metadata"].(map[string]any)
	if md["env_id"] != envA || md["role"] != "see-env" || md["grant_jti"] == "" {
		t.Errorf("metadata = %v", md)
	}
	look := do(t, "GET", h.bao.URL+"/v1/auth/token/lookup-self", map[string]string{"X-Vault-Token": tok}, nil)
	if look.status != 200 {
		t.Fatalf("lookup-self: %d %s", look.status, look.body)
	}
	data := look.json(t)["data"].(map[string]any)
	if data["ttl"].(float64) != 86400 || data["meta"].(map[string]any)["grant_jti"] != md["grant_jti"] {
		t.Errorf("lookup-self data = %v", data)
	}
	exp, err := time.Parse(time.RFC3339, data["expire_time"].(string))
	if err != nil || !exp.Equal(h.clock.Now().Add(24*time.Hour)) {
		t.Errorf("expire_time %v (%v), want now+24h", data["expire_time"], err)
	}
	if _, err := time.Parse(time.RFC3339, data["issue_time"].(string)); err != nil {
		t.Errorf("issue_time: %v", err)
	}

	parts := strings.Split(grant, ".")
	sig, _ := base64.RawURLEncoding.DecodeString(parts[2])
	sig[10] ^= 0x01
	flipped := parts[0] + "." + parts[1] + "." + base64.RawURLEncoding.EncodeToString(sig)
	payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
	edited := parts[0] + "." + base64.RawURLEncoding.EncodeToString(bytes.Replace(payload, []byte(envA), []byte(envB), -1)) + "." + parts[2]
	noneHdr := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`))
	algNone := noneHdr + "." + parts[1] + "."
	other, _ := New(Options{})
	foreign, _ := other.MintGrant(envA, time.Hour)
	expired, _ := h.sim.MintGrant(envA, -time.Minute)
	now := h.clock.Now()
	claims := func(mod func(m map[string]any)) string {
		m := map[string]any{"iss": GrantIssuer, "aud": GrantAudience, "sub": "agent:" + envA, "env_id": envA,
			"kind": GrantKind, "jti": "j1", "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}
		mod(m)
		g, err := h.sim.SignClaims(m)
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	good := claims(func(map[string]any) {})
	if a := h.loginRaw(good); a.status != 200 {
		t.Fatalf("hand-built good claims refused: %d %s", a.status, a.body)
	}
	listAud := claims(func(m map[string]any) { m["aud"] = []string{"x", GrantAudience} })
	if a := h.loginRaw(listAud); a.status != 200 {
		t.Fatalf("aud as a list refused: %d %s", a.status, a.body)
	}
	for name, g := range map[string]string{
		"flipped signature byte": flipped,
		"edited payload":         edited,
		"alg none":               algNone,
		"another key":            foreign,
		"expired":                expired,
		"wrong aud":              claims(func(m map[string]any) { m["aud"] = "vault" }),
		"wrong kind":             claims(func(m map[string]any) { m["kind"] = "enrolment" }),
		"wrong sub":              claims(func(m map[string]any) { m["sub"] = "agent:" + envB }),
		"no env_id":              claims(func(m map[string]any) { delete(m, "env_id"); m["sub"] = "agent:" }),
		"no exp":                 claims(func(m map[string]any) { delete(m, "exp") }),
		"not a jwt":              "abc",
	} {
		a := h.loginRaw(g)
		if a.status != 400 {
			t.Errorf("%s: login %d, want 400", name, a.status)
			continue
		}
		errs, _ := a.json(t)["errors"].([]any)
		if len(errs) != 1 || errs[0] == "" {
			t.Errorf("%s: errors = %s", name, a.body)
		}
	}
	wrongRole := do(t, "POST", h.bao.URL+"/v1/auth/jwt-tenancy/login", nil, map[string]string{"role": "admin", "jwt": grant})
	if wrongRole.status != 400 {
		t.Errorf("wrong role: %d", wrongRole.status)
	}
	if got := h.sim.Counts(envA).Logins; got != 3 {
		t.Errorf("Logins = %d, want 3 (refused logins do not count)", got)
	}
}

func TestLeaseRateLimitSlidingWindow(t *testing.T) {
	h := newHarness(t, Options{})
	tok := h.tokenFor(envA)
	lease := func() answer {
		return h.tenancyCall("POST", "/v1/agent/lease", tok, map[string]string{"env_id": envA, "reason": "apply"})
	}
	for i := range 5 {
		a := lease()
		if a.status != 200 {
			t.Fatalf("lease %d: %d %s", i+1, a.status, a.body)
		}
		var l effects.Lease
		if err := json.Unmarshal(a.body, &l); err != nil {
			t.Fatal(err)
		}
		if l.EnvID != envA || l.TTLS != 3600 || l.Mount != "jwt-tenancy" || l.Role != "see-env" || l.Addr != h.bao.URL {
			t.Fatalf("lease %d = %+v", i+1, l)
		}
		if i == 0 {
			if tok2 := h.login(l.LoginJWT); tok2 == tok {
				t.Fatal("lease grant gave the same token")
			}
		}
		h.clock.Advance(10 * time.Minute)
	}
	// now = start + 50 min; the first lease leaves the window at start + 60 min.
	a := lease()
	if a.status != 429 || a.code(t) != "LEASE_RATE_LIMITED" {
		t.Fatalf("6th lease: %d %s", a.status, a.body)
	}
	if got := a.header.Get("Retry-After"); got != "600" {
		t.Errorf("Retry-After = %q, want 600", got)
	}
	h.clock.Advance(9*time.Minute + 30*time.Second)
	if a := lease(); a.status != 429 || a.header.Get("Retry-After") != "30" {
		t.Errorf("at 59m30s: %d Retry-After %q, want 429 30", a.status, a.header.Get("Retry-After"))
	}
	h.clock.Advance(30 * time.Second)
	if a := lease(); a.status != 200 {
		t.Errorf("after the first lease left the window: %d %s", a.status, a.body)
	}
	if a := lease(); a.status != 429 {
		t.Errorf("the window holds 5 again: %d", a.status)
	}
	c := h.sim.Counts(envA)
	if c.Leases != 6 || c.LeasesRefused != 3 || c.LeaseAsks != 9 {
		t.Errorf("counts = %+v, want 6 granted, 3 refused, 9 asked", c)
	}
	// Another env has its own budget.
	tokB := h.tokenFor(envB)
	if a := h.tenancyCall("POST", "/v1/agent/lease", tokB, map[string]string{"env_id": envB}); a.status != 200 {
		t.Errorf("other env's lease: %d", a.status)
	}
}

func TestEnvPinning(t *testing.T) {
	h := newHarness(t, Options{})
	sha, err := h.sim.AddRelease(envB, "v1", map[string][]byte{"compose.yaml": []byte("services: {}\n")})
	if err != nil {
		t.Fatal(err)
	}
	h.sim.PutSecret(envB, "gemini", map[string]string{"value": "b-secret"})
	h.sim.PutSecret(envA, "gemini", map[string]string{"value": "a-secret"})
	tok := h.tokenFor(envA)

	if a := h.checkin(tok, envA, ""); a.status != 200 {
		t.Fatalf("own env check-in: %d %s", a.status, a.body)
	}
	a := h.checkin(tok, envB, "")
	if a.status != 403 || a.code(t) != "AGENT_ENV_MISMATCH" {
		t.Errorf("other env check-in: %d %s", a.status, a.body)
	}
	if a := h.tenancyCall("GET", "/v1/agent/bundle/"+envB+"/"+sha, tok, nil); a.status != 403 {
		t.Errorf("other env's bundle: %d", a.status)
	}
	if a := h.tenancyCall("POST", "/v1/agent/lease", tok, map[string]string{"env_id": envB}); a.status != 403 {
		t.Errorf("other env's lease: %d", a.status)
	}
	for _, p := range []string{
		"monky/data/" + envB + "/see/gemini",
		"monky/data/" + envA + "/other/gemini",
		"secret/data/" + envA + "/see/gemini",
		"monky/data/" + envA + "/see/../../" + envB + "/see/gemini",
	} {
		a := h.kv(tok, p)
		if a.status != 403 || !strings.Contains(string(a.body), "permission denied") {
			t.Errorf("kv %s: %d %s", p, a.status, a.body)
		}
		if strings.Contains(string(a.body), "b-secret") {
			t.Errorf("kv %s leaked the other env's value", p)
		}
	}
	if a := h.kv(tok, "monky/data/"+envA+"/see/gemini"); a.status != 200 {
		t.Errorf("own kv path: %d", a.status)
	}
	if a := h.checkin("s.nonsense", envA, ""); a.status != 401 || a.code(t) != "AGENT_UNAUTHENTICATED" {
		t.Errorf("unknown bearer: %d %s", a.status, a.body)
	}
	if a := h.tenancyCall("POST", "/v1/agent/checkin", "", effects.CheckinRequest{EnvID: envA}); a.status != 401 {
		t.Errorf("no bearer: %d", a.status)
	}
}

func TestSupersededGrant(t *testing.T) {
	h := newHarness(t, Options{})
	g1, err := h.sim.RevealKit(envA)
	if err != nil {
		t.Fatal(err)
	}
	t1 := h.login(g1)
	if a := h.checkin(t1, envA, ""); a.status != 200 {
		t.Fatalf("check-in: %d", a.status)
	}
	g2, err := h.sim.RevealKit(envA)
	if err != nil {
		t.Fatal(err)
	}
	// The jwt mount keeps no replay state: the superseded grant still logs in.
	t1b := h.login(g1)
	for name, tok := range map[string]string{"minted before": t1, "minted after": t1b} {
		a := h.checkin(tok, envA, "")
		if a.status != 401 || a.code(t) != "AGENT_UNAUTHENTICATED" {
			t.Errorf("token %s the re-reveal: %d %s", name, a.status, a.body)
		}
	}
	// OpenBao itself still honours it (only tenancy refuses it).
	look := do(t, "GET", h.bao.URL+"/v1/auth/token/lookup-self", map[string]string{"X-Vault-Token": t1}, nil)
	if look.status != 200 {
		t.Errorf("lookup-self of a superseded token: %d", look.status)
	}
	t2 := h.login(g2)
	if a := h.checkin(t2, envA, ""); a.status != 200 {
		t.Errorf("token of the new kit: %d %s", a.status, a.body)
	}
	// A superseded grant expires like any other.
	h.clock.Advance(time.Hour)
	if a := h.loginRaw(g1); a.status != 400 {
		t.Errorf("superseded grant after exp: %d", a.status)
	}
}

func untar(t *testing.T, body []byte) map[string][]byte {
	t.Helper()
	if len(body) > 2 && body[0] == 0x1f && body[1] == 0x8b {
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if body, err = io.ReadAll(zr); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(body))
	for {
		hd, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		switch hd.Typeflag {
		case tar.TypeDir:
		case tar.TypeReg:
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			if _, dup := files[hd.Name]; dup {
				t.Fatalf("entry %s twice", hd.Name)
			}
			files[hd.Name] = b
		default:
			t.Fatalf("entry %s has type %c", hd.Name, hd.Typeflag)
		}
	}
}

func TestBundleServedHasItsSha(t *testing.T) {
	h := newHarness(t, Options{})
	files := map[string][]byte{
		"bundle.json":           []byte(`{"agent": {"allow_rollback": true, "revert_on_failure": true}, "disk_need_bytes": 1048576}`),
		"compose.yaml":          []byte("services:\n  api:\n    image: x\n"),
		".env.template":         []byte("A=${A}\n"),
		"secrets.manifest.json": []byte(`{"entries": []}`),
		"config/app.toml":       []byte("x = 1\n"),
	}
	sha, err := h.sim.AddRelease(envA, "v1", files)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.sim.SetDesired(envA, "deadbeef"); err == nil {
		t.Error("SetDesired accepted an unknown sha")
	}
	if err := h.sim.SetDesired(envA, sha); err != nil {
		t.Fatal(err)
	}
	tok := h.tokenFor(envA)
	a := h.checkin(tok, envA, "")
	var cr effects.CheckinResponse
	if err := json.Unmarshal(a.body, &cr); err != nil {
		t.Fatal(err)
	}
	want := effects.CheckinResponse{EnvID: envA, DesiredSha: sha, Action: "apply",
		BundleURL: "/v1/agent/bundle/" + envA + "/" + sha, CheckinIntervalS: 60,
		Vault: &effects.VaultHint{Addr: h.bao.URL, Mount: "monky", Prefix: envA + "/see", AuthMount: "jwt-tenancy", AuthRole: "see-env"}}
	if cr.Vault == nil || *cr.Vault != *want.Vault {
		t.Errorf("vault hint = %+v, want %+v", cr.Vault, want.Vault)
	}
	cr.Vault, want.Vault = nil, nil
	if cr != want {
		t.Errorf("check-in = %+v\nwant %+v", cr, want)
	}

	for _, gz := range []bool{false, true} {
		h.sim.SetBundleGzip(gz)
		b := h.tenancyCall("GET", cr.BundleURL, tok, nil)
		if b.status != 200 || b.header.Get("X-Bundle-Sha") != sha {
			t.Fatalf("gzip=%t: bundle %d X-Bundle-Sha %q", gz, b.status, b.header.Get("X-Bundle-Sha"))
		}
		if ct := b.header.Get("Content-Type"); (gz && ct != "application/gzip") || (!gz && ct != "application/x-tar") {
			t.Errorf("gzip=%t: Content-Type %q", gz, ct)
		}
		got := untar(t, b.body)
		if s := bundle.Sha(got); s != sha {
			t.Errorf("gzip=%t: sha of the served content %s, want %s", gz, s, sha)
		}
		var meta map[string]any
		if err := json.Unmarshal(got["bundle.json"], &meta); err != nil {
			t.Fatal(err)
		}
		if meta["env_id"] != envA || meta["compose_file"] != "compose.yaml" || meta["disk_need_bytes"].(float64) != 1048576 {
			t.Errorf("bundle.json = %v", meta)
		}
		if ag := meta["agent"].(map[string]any); ag["allow_rollback"] != true || ag["revert_on_failure"] != true {
			t.Errorf("agent flags lost: %v", ag)
		}
		fl, _ := json.Marshal(meta["files"])
		if string(fl) != `[".env.template","compose.yaml","config/app.toml","secrets.manifest.json"]` {
			t.Errorf("files = %s", fl)
		}
	}
	h.sim.SetBundleShaHeader("X-Bundle-Sha256")
	if b := h.tenancyCall("GET", cr.BundleURL, tok, nil); b.header.Get("X-Bundle-Sha256") != sha || b.header.Get("X-Bundle-Sha") != "" {
		t.Errorf("X-Bundle-Sha256 header not used: %v", b.header)
	}
	if b := h.tenancyCall("GET", "/v1/agent/bundle/"+envA+"/"+strings.Repeat("0", 64), tok, nil); b.status != 404 {
		t.Errorf("unknown sha: %d", b.status)
	}
	if a := h.checkin(tok, envA, sha); a.json(t)["action"] != "none" {
		t.Errorf("converged check-in: %s", a.body)
	}
	if c := h.sim.Counts(envA); c.Checkins != 2 || c.BundleFetches != 4 {
		t.Errorf("counts = %+v", c)
	}
	// Same files, same archive: the sim is deterministic.
	sha2, err := h.sim.AddRelease(envA, "again", files)
	if err != nil || sha2 != sha {
		t.Errorf("re-adding the same files gave %s (%v)", sha2, err)
	}
	if _, err := h.sim.AddRelease(envA, "bad", map[string][]byte{"../x": nil}); err == nil {
		t.Error("a path leaving the bundle was accepted")
	}

	// the admin API sets the interval every answer carries from now on (mesh-e2e's loop ticks
	// every second); less than a second is refused
	admin := httptest.NewServer(h.sim.AdminHandler())
	defer admin.Close()
	if a := do(t, "POST", admin.URL+"/admin/interval", nil, IntervalRequest{IntervalS: 0}); a.status != 400 {
		t.Errorf("interval 0: %d %s, want 400", a.status, a.body)
	}
	if a := do(t, "POST", admin.URL+"/admin/interval", nil, IntervalRequest{IntervalS: 1}); a.status != 200 {
		t.Fatalf("interval 1: %d %s", a.status, a.body)
	}
	cr = effects.CheckinResponse{}
	if err := json.Unmarshal(h.checkin(tok, envA, "").body, &cr); err != nil || cr.CheckinIntervalS != 1 {
		t.Errorf("after POST /admin/interval 1 the check-in answers interval %d (%v)", cr.CheckinIntervalS, err)
	}
}

func TestKVVersions(t *testing.T) {
	h := newHarness(t, Options{})
	if v := h.sim.PutSecret(envA, "gemini", map[string]string{"value": "one"}); v != 1 {
		t.Fatalf("first version %d", v)
	}
	if v := h.sim.PutSecret(envA, "gemini", map[string]string{"value": "two"}); v != 2 {
		t.Fatalf("second version %d", v)
	}
	tok := h.tokenFor(envA)
	read := func(q string) (answer, map[string]any) {
		a := h.kv(tok, "monky/data/"+envA+"/see/gemini"+q)
		d, _ := a.json(t)["data"].(map[string]any)
		return a, d
	}
	a, d := read("")
	if a.status != 200 || d["data"].(map[string]any)["value"] != "two" || d["metadata"].(map[string]any)["version"].(float64) != 2 {
		t.Errorf("latest: %d %s", a.status, a.body)
	}
	a, d = read("?version=1")
	if a.status != 200 || d["data"].(map[string]any)["value"] != "one" {
		t.Errorf("version 1: %d %s", a.status, a.body)
	}
	h.clock.Advance(time.Minute)
	h.sim.DeleteSecretVersion(envA, "gemini", 1)
	a, d = read("?version=1")
	if a.status != 404 || d == nil || d["data"] != nil {
		t.Fatalf("deleted version: %d %s", a.status, a.body)
	}
	md := d["metadata"].(map[string]any)
	if dt, err := time.Parse(time.RFC3339, md["deletion_time"].(string)); err != nil || !dt.Equal(h.clock.Now()) || md["destroyed"] != false {
		t.Errorf("deleted metadata = %v", md)
	}
	if a, _ := read("?version=3"); a.status != 404 {
		t.Errorf("future version: %d", a.status)
	}
	a = h.kv(tok, "monky/data/"+envA+"/see/nothing")
	if a.status != 404 || strings.TrimSpace(string(a.body)) != `{"errors":[]}` {
		t.Errorf("unknown secret: %d %s", a.status, a.body)
	}
	if a := h.kv("", "monky/data/"+envA+"/see/gemini"); a.status != 403 {
		t.Errorf("no token: %d", a.status)
	}
	if c := h.sim.Counts(envA); c.KVReads != 5 {
		t.Errorf("KVReads = %d, want 5", c.KVReads)
	}
}

func TestTokenRenewRevoke(t *testing.T) {
	h := newHarness(t, Options{TokenTTL: 24 * time.Hour, TokenMaxTTL: 48 * time.Hour})
	tok := h.tokenFor(envA)
	hdr := map[string]string{"X-Vault-Token": tok}
	h.clock.Advance(30 * time.Hour)
	if a := do(t, "GET", h.bao.URL+"/v1/auth/token/lookup-self", hdr, nil); a.status != 403 {
		t.Fatalf("expired token lookup: %d", a.status)
	}
	tok = h.tokenFor(envA)
	hdr = map[string]string{"X-Vault-Token": tok}
	h.clock.Advance(20 * time.Hour)
	a := do(t, "POST", h.bao.URL+"/v1/auth/token/renew-self", hdr, map[string]string{"increment": "24h"})
	if a.status != 200 || a.json(t)["auth"].(map[string]any)["lease_duration"].(float64) != 86400 {
		t.Fatalf("renew: %d %s", a.status, a.body)
	}
	h.clock.Advance(20 * time.Hour) // 40h after issue; max 48h
	// as vault/api sends it: PUT, the increment in seconds
	a = do(t, "PUT", h.bao.URL+"/v1/auth/token/renew-self", hdr, map[string]any{"increment": 86400})
	if got := a.json(t)["auth"].(map[string]any)["lease_duration"].(float64); got != 8*3600 {
		t.Errorf("renew near max ttl: lease_duration %v, want 28800", got)
	}
	look := do(t, "POST", h.bao.URL+"/v1/auth/token/lookup", nil, map[string]string{"token": tok})
	if look.status != 200 || look.json(t)["data"].(map[string]any)["meta"].(map[string]any)["env_id"] != envA {
		t.Errorf("lookup: %d %s", look.status, look.body)
	}
	if a := do(t, "PUT", h.bao.URL+"/v1/auth/token/revoke-self", hdr, nil); a.status != 204 {
		t.Errorf("revoke-self: %d", a.status)
	}
	if a := do(t, "GET", h.bao.URL+"/v1/auth/token/lookup-self", hdr, nil); a.status != 403 {
		t.Errorf("revoked token lookup: %d", a.status)
	}
	if a := h.checkin(tok, envA, ""); a.status != 401 {
		t.Errorf("revoked token check-in: %d", a.status)
	}
	t2 := h.tokenFor(envA)
	h.sim.RevokeTokens(envA)
	if a := h.checkin(t2, envA, ""); a.status != 401 || a.code(t) != "AGENT_UNAUTHENTICATED" {
		t.Errorf("RevokeTokens: check-in %d", a.status)
	}
	if c := h.sim.Counts(envA); c.Renewals != 2 {
		t.Errorf("Renewals = %d", c.Renewals)
	}
}

func TestFailRules(t *testing.T) {
	h := newHarness(t, Options{})
	tok := h.tokenFor(envA)
	h.sim.Fail(FailRule{Path: "/v1/agent/checkin", Status: 503, Code: "MAINTENANCE", Message: "back soon", Times: 2})
	for i := range 2 {
		a := h.checkin(tok, envA, "")
		if a.status != 503 || a.code(t) != "MAINTENANCE" {
			t.Errorf("faulted check-in %d: %d %s", i, a.status, a.body)
		}
	}
	if a := h.checkin(tok, envA, ""); a.status != 200 {
		t.Errorf("after Times ran out: %d", a.status)
	}
	if c := h.sim.Counts(envA); c.Checkins != 3 {
		t.Errorf("Checkins = %d, want 3 (faulted ones count)", c.Checkins)
	}
	h.sim.Fail(FailRule{Path: "/v1/agent/lease", Status: 429, Code: "LEASE_RATE_LIMITED", RetryAfter: "120"})
	for range 3 {
		a := h.tenancyCall("POST", "/v1/agent/lease", tok, map[string]string{"env_id": envA})
		if a.status != 429 || a.header.Get("Retry-After") != "120" {
			t.Errorf("forever rule: %d %q", a.status, a.header.Get("Retry-After"))
		}
	}
	h.sim.Fail(FailRule{Path: "/v1/monky/", Status: 500, Message: "storage down"})
	a := h.kv(tok, "monky/data/"+envA+"/see/x")
	if a.status != 500 || !strings.Contains(string(a.body), `"errors":["storage down"]`) {
		t.Errorf("bao fault: %d %s", a.status, a.body)
	}
	h.sim.ClearFails()
	if a := h.tenancyCall("POST", "/v1/agent/lease", tok, map[string]string{"env_id": envA}); a.status != 200 {
		t.Errorf("after ClearFails: %d", a.status)
	}
	h.sim.Fail(FailRule{Path: "/v1/agent/report", Status: 0, Times: 1})
	req, _ := http.NewRequest("POST", h.tenancy.URL+"/v1/agent/report", strings.NewReader(`{"env_id":"`+envA+`","result":"applied"}`))
	req.Header.Set("Authorization", "Bearer "+tok)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		_ = resp.Body.Close()
		t.Errorf("status-0 rule answered %d, want a closed connection", resp.StatusCode)
	}
}

func TestReportsAndRetire(t *testing.T) {
	h := newHarness(t, Options{})
	tok := h.tokenFor(envA)
	if a := h.tenancyCall("POST", "/v1/agent/report", tok, map[string]string{"env_id": envA, "sha": "x", "result": "up"}); a.status != 422 {
		t.Errorf("result up: %d", a.status)
	}
	rep := effects.Report{EnvID: envA, Sha: "abc", Result: "failed", AgentVersion: "1.0.0", Detail: "ROLLBACK_REFUSED: abc was applied before"}
	if a := h.tenancyCall("POST", "/v1/agent/report", tok, rep); a.status != 200 {
		t.Fatalf("report: %d %s", a.status, a.body)
	}
	if got := h.sim.Reports(envA); len(got) != 1 || got[0].Detail != rep.Detail || got[0].Result != "failed" {
		t.Errorf("Reports = %+v", got)
	}
	if err := h.sim.Retire(envA, true); err != nil {
		t.Fatal(err)
	}
	a := h.checkin(tok, envA, "abc")
	m := a.json(t)
	if a.status != 200 || m["action"] != "down" || m["purge_volumes"] != true {
		t.Fatalf("retired check-in: %d %s", a.status, a.body)
	}
	if a := h.tenancyCall("POST", "/v1/agent/report", tok, effects.Report{EnvID: envA, Sha: "abc", Result: "down"}); a.status != 200 {
		t.Fatalf("down report: %d", a.status)
	}
	if a := h.checkin(tok, envA, ""); a.status != 401 || a.code(t) != "AGENT_UNAUTHENTICATED" {
		t.Errorf("after the down report the env's token is cut off: %d %s", a.status, a.body)
	}
	if c := h.sim.Counts(envA); c.Reports != 3 {
		t.Errorf("Reports count = %d, want 3 requests", c.Reports)
	}
}

func TestApproleLeaseShape(t *testing.T) {
	h := newHarness(t, Options{})
	tok := h.tokenFor(envA)
	h.sim.SetLeaseShape(envA, "approle")
	a := h.tenancyCall("POST", "/v1/agent/lease", tok, map[string]string{"env_id": envA})
	m := a.json(t)
	if a.status != 200 || m["wrapping_token"] == nil || m["role_id"] == nil || m["login_jwt"] != nil {
		t.Errorf("approle lease: %d %s", a.status, a.body)
	}
}

func TestWriteKit(t *testing.T) {
	h := newHarness(t, Options{})
	dir := filepath.Join(t.TempDir(), "kit")
	old, _ := h.sim.RevealKit(envA)
	oldTok := h.login(old)
	err := h.sim.WriteKit(dir, Kit{EnvID: envA, Site: "cbs", TenancyURL: h.tenancy.URL, BaoURL: h.bao.URL,
		StateDir: "/tmp/st", DeployDir: "/tmp/dep", DockerBin: "/tmp/bin/docker"})
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, "bootstrap.jwt"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("bootstrap.jwt: %v %v", fi, err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		EnvID     string `yaml:"env_id"`
		Site      string `yaml:"site"`
		Transport string `yaml:"transport"`
		Tenancy   struct {
			BaseURL string `yaml:"base_url"`
		} `yaml:"tenancy"`
		Bao struct {
			Addr      string `yaml:"addr"`
			AuthMount string `yaml:"auth_mount"`
			Role      string `yaml:"role"`
			KVMount   string `yaml:"kv_mount"`
		} `yaml:"bao"`
		BootstrapPath string `yaml:"bootstrap_path"`
		StateDir      string `yaml:"state_dir"`
		DeployDir     string `yaml:"deploy_dir"`
		DockerBin     string `yaml:"docker_bin"`
		LogLevel      string `yaml:"log_level"`
	}
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil {
		t.Fatalf("config.yaml: %v\n%s", err, raw)
	}
	if cfg.EnvID != envA || cfg.Site != "cbs" || cfg.Transport != "system" || cfg.Tenancy.BaseURL != h.tenancy.URL ||
		cfg.Bao.Addr != h.bao.URL || cfg.Bao.AuthMount != "jwt-tenancy" || cfg.Bao.Role != "see-env" || cfg.Bao.KVMount != "monky" ||
		cfg.BootstrapPath != filepath.Join(dir, "bootstrap.jwt") || cfg.StateDir != "/tmp/st" || cfg.DeployDir != "/tmp/dep" ||
		cfg.DockerBin != "/tmp/bin/docker" || cfg.LogLevel != "INFO" {
		t.Errorf("config = %+v", cfg)
	}
	grant, _ := os.ReadFile(filepath.Join(dir, "bootstrap.jwt"))
	tok := h.login(strings.TrimSpace(string(grant)))
	if a := h.checkin(tok, envA, ""); a.status != 200 {
		t.Errorf("kit token check-in: %d", a.status)
	}
	if a := h.checkin(oldTok, envA, ""); a.status != 401 {
		t.Errorf("the kit did not supersede the earlier grant: %d", a.status)
	}
}

// A kit that names no state_dir gets one inside it, by absolute path, whoever writes it (serve
// --kit, reveal, the trace generator): never the agent's /var/lib default.
func TestWriteKitStateDirDefaultsInsideTheKit(t *testing.T) {
	h := newHarness(t, Options{})
	t.Chdir(t.TempDir())
	if err := h.sim.WriteKit("kit", Kit{EnvID: envA, TenancyURL: h.tenancy.URL, BaoURL: h.bao.URL}); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join("kit", "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs("kit")
	want := fmt.Sprintf("state_dir: %q\n", filepath.Join(abs, "state"))
	if !strings.Contains(string(raw), want) {
		t.Errorf("config.yaml lacks %q:\n%s", want, raw)
	}
}

func TestJWKS(t *testing.T) {
	h := newHarness(t, Options{})
	a := do(t, "GET", h.tenancy.URL+"/.well-known/agent-jwks.json", nil, nil)
	keys, _ := a.json(t)["keys"].([]any)
	if a.status != 200 || len(keys) != 1 {
		t.Fatalf("jwks: %d %s", a.status, a.body)
	}
	k := keys[0].(map[string]any)
	x, _ := base64.RawURLEncoding.DecodeString(k["x"].(string))
	if k["kty"] != "EC" || k["crv"] != "P-256" || k["alg"] != "ES256" || len(x) != 32 {
		t.Errorf("jwk = %v", k)
	}
}

// TestPublishingChecksTheBundle: publishing a release runs the publisher's check (what
// `monky-deployd check bundle` runs): a release a box would refuse is served, with a warning
// naming each finding; a release a box applies is published without one.
func TestPublishingChecksTheBundle(t *testing.T) {
	var mu sync.Mutex
	var logged []string
	s := newSim(t, Options{Logf: func(f string, a ...any) {
		mu.Lock()
		defer mu.Unlock()
		logged = append(logged, fmt.Sprintf(f, a...))
	}})
	warnings := func() []string {
		mu.Lock()
		defer mu.Unlock()
		var w []string
		for _, l := range logged {
			if strings.Contains(l, "a box would refuse it") {
				w = append(w, l)
			}
		}
		logged = nil
		return w
	}
	if _, err := s.AddRelease(envA, "ok", map[string][]byte{"compose.yaml": []byte("services:\n  api:\n    image: x\n")}); err != nil {
		t.Fatal(err)
	}
	if w := warnings(); len(w) != 0 {
		t.Errorf("a release a box applies was warned of: %q", w)
	}
	sha, err := s.AddRelease(envA, "priv", map[string][]byte{"compose.yaml": []byte("services:\n  api:\n    image: x\n    privileged: true\n    pid: host\n")})
	if err != nil {
		t.Fatal(err)
	}
	w := warnings()
	all := strings.Join(w, "\n")
	if len(w) != 2 || !strings.Contains(all, "sim: release "+envA+"/priv: a box would refuse it: PRIVILEGED_REFUSED: service api: privileged: true") ||
		!strings.Contains(all, "sim: release "+envA+"/priv: a box would refuse it: PRIVILEGED_REFUSED: service api: pid: host") {
		t.Errorf("warnings for a privileged release, want one per finding:\n%s", strings.Join(w, "\n"))
	}
	if got, _, ok := s.Release(envA, "priv"); !ok || got != sha {
		t.Errorf("the refused release is not served: %v %q", ok, got)
	}
}
