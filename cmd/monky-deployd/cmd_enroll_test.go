package main

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tikali/monky-deployd/internal/config"
	"github.com/tikali/monky-deployd/internal/testkit"
)

// enrollBox is a config whose identity is dir/identities/monky-host.env-qa-02.json, and a JWT
// file beside it.
type enrollBox struct {
	cfg, identity, jwt string
}

func newEnrollBox(t *testing.T) enrollBox {
	t.Helper()
	dir := t.TempDir()
	b := enrollBox{cfg: filepath.Join(dir, "config.yaml"), identity: filepath.Join(dir, "identities", "monky-host.env-qa-02.json"),
		jwt: filepath.Join(dir, "monky-host.env-qa-02.jwt")}
	testkit.WriteFile(t, b.cfg, "env_id: env-qa-02\nsite: cbs\ntransport: sdk\nidentity: "+b.identity+
		"\nstate_dir: "+filepath.Join(dir, "state")+"\n", 0o600)
	testkit.WriteFile(t, b.jwt, "this.is-not.a-jwt\n", 0o600)
	return b
}

func (b enrollBox) run(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(append([]string{"monky-deployd", "--config", b.cfg, "enroll"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

// loadingIdentity is an identity file the sdk transport loads: a client certificate, its key
// and the CA that signed it, inline as `pem:`.
func loadingIdentity(t *testing.T) []byte {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ziti test network CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "monky-host.env-qa-02"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(key)
	p := func(typ string, b []byte) string {
		return "pem:" + string(pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}))
	}
	raw, _ := json.Marshal(map[string]any{"ztAPI": "https://ctrl.ziti.example:1280",
		"id": map[string]string{"cert": p("CERTIFICATE", der), "key": p("EC PRIVATE KEY", keyDER), "ca": p("CERTIFICATE", caDER)}})
	return raw
}

func TestEnrollUsage(t *testing.T) {
	b := newEnrollBox(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "enroll: --jwt FILE is required: the box's enrolment JWT; see 'monky-deployd help enroll'"},
		{[]string{"--jwt", b.jwt, "extra"}, `enroll: unexpected argument "extra"; see 'monky-deployd help enroll'`},
	} {
		code, out, errs := b.run(c.args...)
		if code != 1 || errs != "monky-deployd: "+c.want+"\n" || out != "" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit 1, stderr %q", c.args, code, out, errs, c.want)
		}
	}
}

// The default build has no SDK: enroll refuses with SDK_UNAVAILABLE and the way to enrol, and
// touches neither the JWT nor the identity.
func TestEnrollNeedsTheSDKBuild(t *testing.T) {
	if config.SDKBuiltIn {
		t.Skip("this build carries the SDK")
	}
	b := newEnrollBox(t)
	code, out, errs := b.run("--jwt", b.jwt)
	if code != 1 || out != "" {
		t.Fatalf("exit %d, stdout %q; want 1 and nothing", code, out)
	}
	for _, w := range []string{"SDK_UNAVAILABLE", "this build has no OpenZiti SDK", "make sdk", "ziti-edge-tunnel add --jwt"} {
		if !strings.Contains(errs, w) {
			t.Errorf("stderr %q lacks %q", errs, w)
		}
	}
	if _, err := os.Stat(b.jwt); err != nil {
		t.Errorf("the JWT is gone: %v", err)
	}
	if _, err := os.Stat(b.identity); err == nil {
		t.Errorf("an identity was written")
	}
}

// In the sdk build: an identity that loads is kept without --force (and so is the JWT); with
// --force, or when it does not load, the enrolment goes on — and a JWT the SDK cannot use
// stops it before anything is written or deleted.
func TestEnrollKeepsAWorkingIdentity(t *testing.T) {
	if !config.SDKBuiltIn {
		t.Skip("the default build has no SDK (TestEnrollNeedsTheSDKBuild)")
	}
	working := loadingIdentity(t)
	for _, c := range []struct {
		name     string
		identity []byte // nil: none
		force    bool
		want     []string
	}{
		{"working, no --force", working, false, []string{"already holds an identity that loads", "it is kept", "enroll --force replaces it"}},
		{"working, --force", working, true, []string{"enrolment JWT is not one this controller signed", "nothing was written", "is kept"}},
		{"damaged", []byte(`{"ztAPI": "https://ctrl.ziti.example:1280"}`), false, []string{"replacing", "which does not load", "enrolment JWT is not one"}},
		{"none", nil, false, []string{"enrolment JWT is not one this controller signed", "nothing was written"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := newEnrollBox(t)
			if c.identity != nil {
				testkit.WriteFile(t, b.identity, string(c.identity), 0o600)
			}
			args := []string{"--jwt", b.jwt}
			if c.force {
				args = append(args, "--force")
			}
			code, out, errs := b.run(args...)
			if code != 1 || out != "" {
				t.Fatalf("exit %d, stdout %q; want 1 and nothing", code, out)
			}
			for _, w := range c.want {
				if !strings.Contains(errs, w) {
					t.Errorf("stderr %q lacks %q", errs, w)
				}
			}
			if _, err := os.Stat(b.jwt); err != nil {
				t.Errorf("the JWT is gone: %v", err)
			}
			got, err := os.ReadFile(b.identity)
			if c.identity == nil {
				if err == nil {
					t.Errorf("an identity was written")
				}
			} else if !bytes.Equal(got, c.identity) {
				t.Errorf("the identity changed")
			}
		})
	}
}
