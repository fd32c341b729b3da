// Package vault starts a real HashiCorp Vault in-process (vault.NewTestCluster, one core,
// the real HTTP handler over TLS on 127.0.0.1) and configures it as the seeds' OpenBao
// (PROTOCOL.md §3): a jwt auth mount at jwt-tenancy trusting tenancy's ES256 key, role see-env,
// the templated policy see-env, and a KV-v2 mount monky.
//
// It is for the e2e suite only. It may not print the root token, a tenancy-side token or any
// KV value; its Vault logs go to a file in the test's temp dir, never to the test output.
package vault

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	jwtauth "github.com/hashicorp/vault-plugin-auth-jwt"
	kv "github.com/hashicorp/vault-plugin-secrets-kv"
	"github.com/hashicorp/vault/api"
	vaulthttp "github.com/hashicorp/vault/http"
	"github.com/hashicorp/vault/sdk/logical"
	hvault "github.com/hashicorp/vault/vault"
)

// The names of record (PROTOCOL.md §3).
const (
	AuthMount = "jwt-tenancy"
	Role      = "see-env"
	Policy    = "see-env"
	KVMount   = "monky"
	Audience  = "openbao-see-env"
)

// Vault is a started, configured Vault.
type Vault struct {
	Addr     string // https://127.0.0.1:<port>
	CAFile   string // the cluster CA, PEM (what bao.ca_file points at)
	CAPEM    []byte
	Accessor string // the jwt mount's accessor, as the policy template names it
	// TenancyToken may only call auth/token/lookup: what tenancy holds to check bearers.
	TenancyToken string

	root    *api.Client
	cluster *hvault.TestCluster
	reads   *atomic.Int64 // GETs of secrets under the KV mount, whoever asked
}

// Start starts Vault and configures it to trust pubKeyPEM (tenancy's grant key). It stops
// Vault when t ends. The Vault log goes to logDir/vault.log.
func Start(t testing.TB, pubKeyPEM []byte, logDir string) *Vault {
	t.Helper()
	logf, err := os.Create(filepath.Join(logDir, "vault.log"))
	if err != nil {
		t.Fatalf("vault log: %v", err)
	}
	t.Cleanup(func() { _ = logf.Close() })
	logger := hclog.New(&hclog.LoggerOptions{Name: "vault", Output: logf, Level: hclog.Info})
	reads := &atomic.Int64{}
	cluster := hvault.NewTestCluster(t, &hvault.CoreConfig{
		CredentialBackends: map[string]logical.Factory{"jwt": jwtauth.Factory},
		LogicalBackends:    map[string]logical.Factory{"kv": kv.Factory},
		Logger:             logger,
	}, &hvault.TestClusterOptions{HandlerFunc: countReads(reads), NumCores: 1, Logger: logger})
	cluster.Start()
	t.Cleanup(cluster.Cleanup)
	core := cluster.Cores[0]
	hvault.TestWaitActive(t, core.Core)

	v := &Vault{
		Addr:    fmt.Sprintf("https://127.0.0.1:%d", core.Listeners[0].Address.Port),
		CAFile:  filepath.Join(logDir, "vault-ca.pem"),
		CAPEM:   cluster.CACertPEM,
		root:    core.Client,
		cluster: cluster,
		reads:   reads,
	}
	if err := os.WriteFile(v.CAFile, v.CAPEM, 0o644); err != nil {
		t.Fatalf("vault ca file: %v", err)
	}
	if err := v.configure(pubKeyPEM); err != nil {
		t.Fatalf("configure vault: %v", err)
	}
	return v
}

func (v *Vault) configure(pubKeyPEM []byte) error {
	c := v.root
	if err := c.Sys().EnableAuthWithOptions(AuthMount, &api.EnableAuthOptions{Type: "jwt"}); err != nil {
		return fmt.Errorf("enable jwt: %w", err)
	}
	auths, err := c.Sys().ListAuth()
	if err != nil {
		return fmt.Errorf("list auth: %w", err)
	}
	m := auths[AuthMount+"/"]
	if m == nil {
		return fmt.Errorf("jwt mount %s not listed", AuthMount)
	}
	v.Accessor = m.Accessor
	if _, err := c.Logical().Write("auth/"+AuthMount+"/config", map[string]any{
		"jwt_validation_pubkeys": []string{string(pubKeyPEM)},
	}); err != nil {
		return fmt.Errorf("jwt config: %w", err)
	}
	if _, err := c.Logical().Write("auth/"+AuthMount+"/role/"+Role, map[string]any{
		"role_type":       "jwt",
		"bound_audiences": []string{Audience},
		"user_claim":      "sub",
		"bound_claims":    map[string]any{"kind": "deploy-grant"},
		"claim_mappings":  map[string]any{"env_id": "env_id", "jti": "grant_jti"},
		"token_policies":  []string{Policy},
		"token_ttl":       "24h",
		"token_max_ttl":   "720h",
	}); err != nil {
		return fmt.Errorf("jwt role: %w", err)
	}
	policy := fmt.Sprintf(`
path "%s/data/{{identity.entity.aliases.%s.metadata.env_id}}/see/*" {
  capabilities = ["read"]
}
path "auth/token/lookup-self" {
  capabilities = ["read"]
}
path "auth/token/renew-self" {
  capabilities = ["update"]
}
`, KVMount, v.Accessor)
	if err := c.Sys().PutPolicy(Policy, policy); err != nil {
		return fmt.Errorf("policy %s: %w", Policy, err)
	}
	if err := c.Sys().PutPolicy("tenancy-lookup", `path "auth/token/lookup" { capabilities = ["update"] }`); err != nil {
		return fmt.Errorf("policy tenancy-lookup: %w", err)
	}
	tok, err := c.Auth().Token().Create(&api.TokenCreateRequest{Policies: []string{"tenancy-lookup"}, NoDefaultPolicy: true, TTL: "24h"})
	if err != nil {
		return fmt.Errorf("tenancy token: %w", err)
	}
	v.TenancyToken = tok.Auth.ClientToken
	if err := c.Sys().Mount(KVMount, &api.MountInput{Type: "kv", Options: map[string]string{"version": "2"}}); err != nil {
		return fmt.Errorf("mount %s: %w", KVMount, err)
	}
	// A KV-v2 mount answers writes only once its upgrade finished.
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, err := c.KVv2(KVMount).Put(context.Background(), "_probe/see/ready", map[string]any{"value": "1"})
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("kv mount not ready: %w", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// countReads is Vault's own HTTP handler, counting each read of a secret under the KV mount.
func countReads(n *atomic.Int64) hvault.HandlerHandler {
	return vaulthttp.HandlerFunc(func(p *hvault.HandlerProperties) http.Handler {
		h := vaulthttp.Handler.Handler(p)
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/v1/"+KVMount+"/data/") {
				n.Add(1)
			}
			h.ServeHTTP(w, r)
		})
	})
}

// KVReads is how many reads of a secret Vault has been asked for, sealed or not.
func (v *Vault) KVReads() int64 { return v.reads.Load() }

// Seal seals Vault as an operator does for maintenance: until Unseal every request is answered
// 503 "Vault is sealed"; tokens and secrets are kept.
func (v *Vault) Seal(t testing.TB) {
	t.Helper()
	if err := v.root.Sys().Seal(); err != nil {
		t.Fatalf("seal: %v", err)
	}
}

// Unseal unseals Vault with the cluster's keys and waits until it is active again.
func (v *Vault) Unseal(t testing.TB) {
	t.Helper()
	v.cluster.UnsealCores(t)
}

// Put writes a new version of monky/data/<envID>/see/<name> and returns its version number.
func (v *Vault) Put(t testing.TB, envID, name string, data map[string]any) int {
	t.Helper()
	s, err := v.root.KVv2(KVMount).Put(context.Background(), envID+"/see/"+name, data)
	if err != nil {
		t.Fatalf("kv put %s/see/%s: %v", envID, name, err)
	}
	return s.VersionMetadata.Version
}

// HTTPClient is a client that trusts the cluster's CA (and nothing else).
func (v *Vault) HTTPClient() *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(v.CAPEM)
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
	}}
}

// Login logs in with grant at the jwt mount as the agent does, and returns the raw answer.
func (v *Vault) Login(grant string) (*api.Secret, error) {
	c, err := v.root.Clone()
	if err != nil {
		return nil, err
	}
	c.ClearToken()
	return c.Logical().Write("auth/"+AuthMount+"/login", map[string]any{"role": Role, "jwt": grant})
}

// LookupSelf looks up token as itself.
func (v *Vault) LookupSelf(token string) (*api.Secret, error) {
	c, err := v.root.Clone()
	if err != nil {
		return nil, err
	}
	c.SetToken(token)
	return c.Auth().Token().LookupSelf()
}
