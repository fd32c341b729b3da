package sim

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/internal/vocab"
)

// TestExternalBao: with UseExternalBao, tenancy asks the external server's auth/token/lookup
// (with the tenancy-side token) who a bearer is, pins it to its env, and refuses a token whose
// grant it superseded.
func TestExternalBao(t *testing.T) {
	s := newSim(t, Options{})
	grant, err := s.MintGrant(envA, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.signer.verify(grant)
	if err != nil {
		t.Fatal(err)
	}
	const tenancyTok, agentTok = "hvs.tenancy-side", "hvs.agent-token"
	var lookups int
	ext := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/auth/token/lookup" || r.Header.Get("X-Vault-Token") != tenancyTok {
			baoError(w, http.StatusForbidden, "permission denied")
			return
		}
		lookups++
		var body struct{ Token string }
		_ = json.Unmarshal(readBody(r), &body)
		if body.Token != agentTok {
			baoError(w, http.StatusForbidden, "bad token")
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"data": map[string]any{
			"ttl": 86399, "meta": map[string]string{"env_id": envA, "grant_jti": c.JTI, "role": "see-env"}}})
	}))
	defer ext.Close()
	s.UseExternalBao(&ExternalBao{Addr: ext.URL + "/", Token: tenancyTok})
	ten := httptest.NewServer(s.TenancyHandler())
	defer ten.Close()

	checkin := func(env, bearer string) (int, string) {
		t.Helper()
		body, _ := json.Marshal(effects.CheckinRequest{EnvID: env})
		req, _ := http.NewRequest(http.MethodPost, ten.URL+"/v1/agent/checkin", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+bearer)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		return resp.StatusCode, b.String()
	}
	if st, body := checkin(envA, agentTok); st != http.StatusOK {
		t.Fatalf("a token the external server knows: %d %s", st, body)
	}
	if ci, _ := s.LastCheckin(envA); ci.EnvID != envA {
		t.Errorf("the accepted check-in was not recorded")
	}
	var got effects.CheckinResponse
	_, body := checkin(envA, agentTok)
	_ = json.Unmarshal([]byte(body), &got)
	if got.Vault == nil || got.Vault.Addr != ext.URL {
		t.Errorf("check-in vault hint %+v, want addr %s", got.Vault, ext.URL)
	}
	if st, body := checkin(envA, "hvs.unknown"); st != http.StatusUnauthorized || !strings.Contains(body, string(vocab.AgentUnauthenticated)) {
		t.Errorf("unknown token: %d %s, want 401", st, body)
	}
	if st, body := checkin(envB, agentTok); st != http.StatusForbidden || !strings.Contains(body, string(vocab.AgentEnvMismatch)) {
		t.Errorf("token of %s checking in as %s: %d %s, want 403", envA, envB, st, body)
	}
	if _, err := s.RevealKit(envA); err != nil {
		t.Fatal(err)
	}
	if st, body := checkin(envA, agentTok); st != http.StatusUnauthorized || !strings.Contains(body, "superseded") {
		t.Errorf("token of a superseded grant: %d %s, want 401 superseded", st, body)
	}
	if lookups < 4 {
		t.Errorf("external lookups %d: tenancy did not ask the external server", lookups)
	}
	if s.Tokens(envA) != 0 {
		t.Errorf("the sim minted tokens of its own while an external server is in use")
	}

	// The PEM is the signing key's public half.
	p, _ := s.PublicKeyPEM()
	blk, _ := pem.Decode(p)
	if blk == nil || blk.Type != "PUBLIC KEY" {
		t.Fatalf("PublicKeyPEM: %q", p)
	}
	pub, err := x509.ParsePKIXPublicKey(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if !pub.(*ecdsa.PublicKey).Equal(&s.signer.key.PublicKey) {
		t.Errorf("PublicKeyPEM is not the signing key")
	}
}
