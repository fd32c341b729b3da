package transport

import (
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
	"syscall"
	"testing"
	"time"

	"github.com/tikali/monky-deployd/internal/testkit"
)

// zitiIdentity is an identity as the tunneller enrols one: a client certificate and its key,
// signed by the network's CA, all three inline as `pem:`.
type zitiIdentity struct {
	API, Cert, Key, CA string
}

func newZitiIdentity(t testing.TB) zitiIdentity {
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
	return zitiIdentity{
		API:  "https://ctrl.ziti.example:1280",
		Cert: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		Key:  string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})),
		CA:   string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})),
	}
}

// JSON is the identity file; a field left empty is left out.
func (z zitiIdentity) JSON() []byte {
	id := map[string]string{}
	for k, v := range map[string]string{"key": z.Key, "cert": z.Cert, "ca": z.CA} {
		if v != "" {
			id[k] = "pem:" + v
		}
	}
	doc := map[string]any{"id": id}
	if z.API != "" {
		doc["ztAPI"] = z.API
	}
	raw, _ := json.MarshalIndent(doc, "", "  ")
	return raw
}

// damagedIdentity is an identity file the sdk transport must refuse with code, in words
// holding want, before the SDK sees it.
type damagedIdentity struct {
	name       string
	data       []byte
	mode       os.FileMode
	code, want string
}

// damagedIdentities are the faults of an identity file the sdk transport refuses: the SDK
// itself panics on the key that is not a key, and accepts the others to fail later, at a dial.
func damagedIdentities(t *testing.T) []damagedIdentity {
	good := newZitiIdentity(t)
	full := good.JSON()
	notKey := good
	notKey.Key = "this is not a key\n"
	otherKey := good
	otherKey.Key = newZitiIdentity(t).Key
	certAsKey := good
	certAsKey.Key = good.Cert
	noCA := good
	noCA.CA = ""
	badCA := good
	badCA.CA = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"
	noAPI := good
	noAPI.API = ""
	httpAPI := good
	httpAPI.API = "http://ctrl.ziti.example:1280"
	const ti = "TRANSPORT_IDENTITY"
	return []damagedIdentity{
		{"truncated JSON", full[:len(full)/2], 0o640, ti, "is not a ziti identity (not JSON: it ends at byte"},
		{"key not a key", notKey.JSON(), 0o640, ti, "`id.key`: holds no PEM block: it is not a key"},
		{"key is a certificate", certAsKey.JSON(), 0o640, ti, "`id.key`: its PEM block is a \"CERTIFICATE\", not a private key"},
		{"key of another identity", otherKey.JSON(), 0o640, ti, "`id.key` is not the private key of `id.cert` (monky-host.env-qa-02)"},
		{"missing CA", noCA.JSON(), 0o640, ti, "has no `id.ca`"},
		{"CA that does not parse", badCA.JSON(), 0o640, ti, "`id.ca`: PEM block 1 is not a certificate that parses"},
		{"CA file absent", []byte(strings.Replace(string(full), `"ca": "pem:`+jsonEscaped(good.CA)+`"`, `"ca": "file:///nonexistent/ca.pem"`, 1)), 0o640, ti,
			"`id.ca`: names /nonexistent/ca.pem, which does not exist"},
		{"key in a key store", []byte(strings.Replace(string(full), `"key": "pem:`+jsonEscaped(good.Key)+`"`, `"key": "pkcs11:///usr/lib/softhsm.so?id=01"`, 1)), 0o640, ti,
			"`id.key`: names a key store (pkcs11:) the agent does not load"},
		{"CA a FIFO", []byte(strings.Replace(string(full), `"ca": "pem:`+jsonEscaped(good.CA)+`"`, `"ca": "file:`+fifo(t)+`"`, 1)), 0o640, ti,
			"which is not a regular file"},
		{"no ztAPI", noAPI.JSON(), 0o640, ti, "no `ztAPI`"},
		{"ztAPI not https", httpAPI.JSON(), 0o640, ti, "`ztAPI` is not an https URL"},
		{"id not an object", []byte(`{"ztAPI": "https://c:1280", "id": "x"}`), 0o640, ti, "(`id` is a JSON string, not a"},
		{"group-writable", full, 0o660, ti, "is group-writable (mode 0660)"},
		{"world-writable", full, 0o646, ti, "is world-writable (mode 0646)"},
	}
}

// fifo is a named pipe: a read of it waits for a writer that never comes.
func fifo(t *testing.T) string {
	p := filepath.Join(t.TempDir(), "ca.pem")
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func jsonEscaped(s string) string {
	raw, _ := json.Marshal(s)
	return string(raw[1 : len(raw)-1])
}

// writeIdentity writes data at mode (testkit.WriteFile sets it past the umask).
func writeIdentity(t *testing.T, data []byte, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "monky-host.env-qa-02.json")
	testkit.WriteFile(t, p, string(data), mode)
	return p
}

// checkDamaged asserts err is the refusal d asks for, on one line, without the key.
func checkDamaged(t *testing.T, d damagedIdentity, p string, err error) {
	t.Helper()
	e := testkit.ErrorAs[*Error](t, err)
	if string(e.Code) != d.code || e.TLS || e.Op != "transport sdk" {
		t.Fatalf("code %q op %q tls %v, want %s: %v", e.Code, e.Op, e.TLS, d.code, err)
	}
	msg := err.Error()
	if !strings.Contains(msg, "identity "+p+" ") || !strings.Contains(msg, d.want) {
		t.Fatalf("message\n %q\ndoes not name the file and\n %q", msg, d.want)
	}
	if strings.Contains(msg, "\n") || strings.Contains(msg, "PRIVATE KEY") || strings.Contains(msg, "BEGIN") {
		t.Fatalf("message is more than a line or quotes PEM: %q", msg)
	}
}

// TestSDKIdentityChecks: each damaged identity is refused by the check the sdk transport runs
// before the SDK sees the file, with its code and a fix; an enrolled identity passes.
func TestSDKIdentityChecks(t *testing.T) {
	for _, d := range damagedIdentities(t) {
		t.Run(d.name, func(t *testing.T) {
			p := writeIdentity(t, d.data, d.mode)
			_, err := loadSDKIdentity(p)
			checkDamaged(t, d, p, err)
		})
	}
	t.Run("absent", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "missing.json")
		_, err := loadSDKIdentity(p)
		checkIdentityError(t, err, "transport sdk: IDENTITY_UNUSABLE: identity "+p+" does not exist")
	})
	t.Run("enrolled", func(t *testing.T) {
		good := newZitiIdentity(t)
		id, err := loadSDKIdentity(writeIdentity(t, good.JSON(), 0o640))
		if err != nil {
			t.Fatal(err)
		}
		if id.ZtAPI != good.API || id.Cert != good.Cert || id.Key != good.Key || id.CA != good.CA {
			t.Fatalf("loaded %+v", id)
		}
	})
	t.Run("files named by path", func(t *testing.T) {
		good := newZitiIdentity(t)
		dir := t.TempDir()
		doc := map[string]any{"ztAPI": good.API, "id": map[string]string{
			"cert": "file://" + writeFileIn(t, dir, "cert.pem", good.Cert),
			"key":  writeFileIn(t, dir, "key.pem", good.Key),
			"ca":   "file:" + writeFileIn(t, dir, "ca.pem", good.CA)}}
		raw, _ := json.Marshal(doc)
		id, err := loadSDKIdentity(writeIdentity(t, raw, 0o600))
		if err != nil {
			t.Fatal(err)
		}
		if id.Cert != good.Cert || id.Key != good.Key || id.CA != good.CA {
			t.Fatalf("loaded %+v", id)
		}
	})
}

func writeFileIn(t *testing.T, dir, name, data string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	testkit.WriteFile(t, p, data, 0o600)
	return p
}

// FuzzSDKIdentity: whatever bytes the identity file holds, the check ends without a panic in a
// coded one-line refusal, or with a certificate, key and CA the SDK's loader can take.
func FuzzSDKIdentity(f *testing.F) {
	good := newZitiIdentity(f).JSON()
	f.Add(good)
	f.Add(good[:len(good)/2])
	f.Add([]byte(`{"ztAPI": "https://c:1280", "id": {"cert": "pem:x", "key": "pem:-----BEGIN EC PRIVATE KEY-----\nAAAA\n-----END EC PRIVATE KEY-----\n", "ca": "pem:x"}}`))
	f.Add([]byte(`{"ztAPIs": ["https://c:1280"], "id": {"cert": "/dev/null", "key": "file:///dev/zero", "ca": "engine:x"}}`))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(dir, "id.json")
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		id, err := loadSDKIdentity(p)
		if err != nil {
			e := testkit.ErrorAs[*Error](t, err)
			if (e.Code != "TRANSPORT_IDENTITY" && e.Code != "IDENTITY_UNUSABLE") || strings.Contains(err.Error(), "\n") {
				t.Fatalf("code %q: %q", e.Code, err)
			}
			return
		}
		if _, err := pemCertificates([]byte(id.CA)); err != nil || pemPrivateKey([]byte(id.Key)) != nil {
			t.Fatalf("accepted an identity whose CA or key does not parse: %v", err)
		}
	})
}
