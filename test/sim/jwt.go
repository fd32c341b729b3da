package sim

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/asn1"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"time"
)

// Grant claims as tenancy signs them and the jwt-tenancy mount checks them.
const (
	GrantIssuer   = "monky-tenancy"
	GrantAudience = "openbao-see-env"
	GrantKind     = "deploy-grant"
)

// grantClaims is the payload of a deploy grant.
type grantClaims struct {
	Iss   string `json:"iss"`
	Aud   any    `json:"aud"` // a string, or a list of strings
	Sub   string `json:"sub"`
	EnvID string `json:"env_id"`
	Kind  string `json:"kind"`
	JTI   string `json:"jti"`
	Iat   int64  `json:"iat"`
	Exp   int64  `json:"exp"`
}

func (c grantClaims) hasAudience(want string) bool {
	switch a := c.Aud.(type) {
	case string:
		return a == want
	case []any:
		for _, v := range a {
			if s, ok := v.(string); ok && s == want {
				return true
			}
		}
	}
	return false
}

var b64 = base64.RawURLEncoding

// signer holds the sim's ES256 key (tenancy's grant signer).
type signer struct {
	key *ecdsa.PrivateKey
	kid string
}

func newSigner() (*signer, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate es256 key: %w", err)
	}
	pub, err := key.PublicKey.Bytes()
	if err != nil {
		return nil, fmt.Errorf("encode public key: %w", err)
	}
	sum := sha256.Sum256(pub)
	return &signer{key: key, kid: hex.EncodeToString(sum[:8])}, nil
}

// sign returns the compact JWS of claims (any JSON-encodable value).
func (s *signer) sign(claims any) (string, error) {
	hdr, err := json.Marshal(map[string]string{"alg": "ES256", "typ": "JWT", "kid": s.kid})
	if err != nil {
		return "", fmt.Errorf("encode jwt header: %w", err)
	}
	body, err := json.Marshal(claims)
	if err != nil {
		return "", fmt.Errorf("encode jwt claims: %w", err)
	}
	input := b64.EncodeToString(hdr) + "." + b64.EncodeToString(body)
	digest := sha256.Sum256([]byte(input))
	der, err := ecdsa.SignASN1(rand.Reader, s.key, digest[:])
	if err != nil {
		return "", fmt.Errorf("sign jwt: %w", err)
	}
	var rs struct{ R, S *big.Int }
	if _, err := asn1.Unmarshal(der, &rs); err != nil {
		return "", fmt.Errorf("decode signature: %w", err)
	}
	raw := make([]byte, 64)
	rs.R.FillBytes(raw[:32])
	rs.S.FillBytes(raw[32:])
	return input + "." + b64.EncodeToString(raw), nil
}

// Verification failures, worded as the jwt auth method words them.
var (
	errMalformed = errors.New("error validating token: malformed token")
	errAlg       = errors.New("error validating token: unsupported signing algorithm")
	errSignature = errors.New("error validating token: failed to verify id token signature")
)

// verify checks the JWS signature and decodes the claims. It does not check any claim.
func (s *signer) verify(token string) (grantClaims, error) {
	var c grantClaims
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return c, errMalformed
	}
	hdrJSON, err := b64.DecodeString(parts[0])
	if err != nil {
		return c, errMalformed
	}
	var hdr struct {
		Alg string `json:"alg"`
	}
	if err := json.Unmarshal(hdrJSON, &hdr); err != nil {
		return c, errMalformed
	}
	if hdr.Alg != "ES256" {
		return c, errAlg
	}
	sig, err := b64.DecodeString(parts[2])
	if err != nil || len(sig) != 64 {
		return c, errSignature
	}
	der, err := asn1.Marshal(struct{ R, S *big.Int }{
		new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:]),
	})
	if err != nil {
		return c, errSignature
	}
	digest := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if !ecdsa.VerifyASN1(&s.key.PublicKey, digest[:], der) {
		return c, errSignature
	}
	body, err := b64.DecodeString(parts[1])
	if err != nil {
		return c, errMalformed
	}
	if err := json.Unmarshal(body, &c); err != nil {
		return c, errMalformed
	}
	return c, nil
}

// jwks is the public key set tenancy publishes at /.well-known/agent-jwks.json.
func (s *signer) jwks() (map[string]any, error) {
	pub, err := s.key.PublicKey.Bytes() // 0x04 || X || Y
	if err != nil {
		return nil, fmt.Errorf("encode public key: %w", err)
	}
	return map[string]any{"keys": []map[string]string{{
		"kty": "EC", "crv": "P-256", "alg": "ES256", "use": "sig", "kid": s.kid,
		"x": b64.EncodeToString(pub[1:33]), "y": b64.EncodeToString(pub[33:65]),
	}}}, nil
}

// newGrantClaims are the claims of a fresh deploy grant for envID valid for ttl from now.
func newGrantClaims(envID string, now time.Time, ttl time.Duration) grantClaims {
	return grantClaims{
		Iss: GrantIssuer, Aud: GrantAudience, Sub: "agent:" + envID, EnvID: envID,
		Kind: GrantKind, JTI: randomHex(16), Iat: now.Unix(), Exp: now.Add(ttl).Unix(),
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return hex.EncodeToString(b)
}

const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

func randomBase62(n int) string {
	out := make([]byte, n)
	for i := range out {
		v, _ := rand.Int(rand.Reader, big.NewInt(int64(len(base62))))
		out[i] = base62[v.Int64()]
	}
	return string(out)
}
