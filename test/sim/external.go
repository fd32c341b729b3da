package sim

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/tikali/monky-deployd/internal/vocab"
)

// ExternalBao is a real OpenBao (or Vault) that tenancy trusts instead of the sim's own
// OpenBao side: tenancy checks bearers with `auth/token/lookup` there, using Token (a
// tenancy-side token allowed to look tokens up), and the grants the sim signs are the ones
// that server's jwt mount validates (configure it with PublicKeyPEM or the JWKS the tenancy
// handler serves). Supersession stays tenancy's own: a grant the sim superseded is refused
// with 401 whatever the lookup answers.
type ExternalBao struct {
	Addr   string       // base URL, e.g. https://127.0.0.1:8200
	Token  string       // tenancy-side token; never logged
	Client *http.Client // nil: a client with a 10 s timeout (a TLS server needs its CA here)
}

// UseExternalBao switches tenancy's bearer check to ext (nil switches back to the sim's own
// tokens) and sets the OpenBao address the check-in hint and leases carry to ext.Addr.
func (s *Sim) UseExternalBao(ext *ExternalBao) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ext == nil {
		s.external = nil
		return
	}
	cp := *ext
	if cp.Client == nil {
		cp.Client = &http.Client{Timeout: 10 * time.Second}
	}
	cp.Addr = strings.TrimRight(cp.Addr, "/")
	s.external = &cp
	s.baoAddr = cp.Addr
}

// PublicKeyPEM returns the sim's grant-signing public key as a PEM "PUBLIC KEY" block, the
// form a jwt auth mount's jwt_validation_pubkeys takes.
func (s *Sim) PublicKeyPEM() ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(&s.signer.key.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("public key pem: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), nil
}

// errLookupRefused is a bearer the external server does not know (or no longer knows).
var errLookupRefused = errors.New("token lookup refused")

// externalLookup asks ext who the bearer v is: its env_id and grant_jti from the token's
// metadata. It returns errLookupRefused when the server refuses the token, another error when
// the server cannot be asked.
func externalLookup(ctx context.Context, ext *ExternalBao, v string) (envID, jti string, err error) {
	if v == "" {
		return "", "", errLookupRefused
	}
	body, _ := json.Marshal(map[string]string{"token": v})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ext.Addr+"/v1/auth/token/lookup", bytes.NewReader(body))
	if err != nil {
		return "", "", fmt.Errorf("token lookup: %w", err)
	}
	req.Header.Set("X-Vault-Token", ext.Token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := ext.Client.Do(req)
	if err != nil {
		return "", "", fmt.Errorf("token lookup: %w", err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	switch {
	case resp.StatusCode == http.StatusForbidden || resp.StatusCode == http.StatusBadRequest ||
		resp.StatusCode == http.StatusNotFound:
		// Vault answers a bad or unknown token to lookup with 403 "bad token" (or 400).
		return "", "", errLookupRefused
	case resp.StatusCode != http.StatusOK:
		return "", "", fmt.Errorf("token lookup: status %d", resp.StatusCode)
	}
	var doc struct {
		Data struct {
			Meta map[string]string `json:"meta"`
			TTL  int64             `json:"ttl"`
		} `json:"data"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return "", "", fmt.Errorf("token lookup: answer is not JSON")
	}
	return doc.Data.Meta["env_id"], doc.Data.Meta["grant_jti"], nil
}

// authExternal is authTenancy against an external OpenBao.
func (s *Sim) authExternal(w http.ResponseWriter, r *http.Request, ext *ExternalBao, envID string) *token {
	envOf, jti, err := externalLookup(r.Context(), ext, bearer(r))
	if err != nil && !errors.Is(err, errLookupRefused) {
		s.opts.Logf("sim: %v", err)
		tenancyError(w, http.StatusServiceUnavailable, "OPENBAO_UNAVAILABLE", "cannot check the bearer")
		return nil
	}
	s.mu.Lock()
	var known, superseded bool
	if err == nil && envOf != "" {
		superseded, known = s.envLocked(envOf).grants[jti]
	}
	s.mu.Unlock()
	switch {
	case err != nil || envOf == "":
		tenancyError(w, http.StatusUnauthorized, vocab.AgentUnauthenticated, "bearer refused: token unknown, expired or revoked")
		return nil
	case !known || superseded:
		tenancyError(w, http.StatusUnauthorized, vocab.AgentUnauthenticated, "bearer refused: its deploy grant was superseded")
		return nil
	case envOf != envID:
		tenancyError(w, http.StatusForbidden, vocab.AgentEnvMismatch, fmt.Sprintf("token is pinned to %s, not %s", envOf, envID))
		return nil
	}
	return &token{envID: envOf, jti: jti}
}
