package transport

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tikali/monky-deployd/internal/config"
	"github.com/tikali/monky-deployd/internal/testkit"
)

const baoName = "bao.cbs.tikali.net"

// testCA is a private CA made for the test and a server certificate it signed.
type testCA struct {
	caPEM  []byte
	server tls.Certificate
}

func newTestCA(t *testing.T, names ...string) testCA {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "monky test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: names[0]},
		DNSNames:     names,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return testCA{
		caPEM:  pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		server: tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key},
	}
}

// tlsServer serves "ok" over TLS with the CA's server certificate.
func tlsServer(t *testing.T, ca testCA) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "ok "+r.Host)
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{ca.server}}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // handshake failures are the point of some tests
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

func writeFile(t *testing.T, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

const goodIdentity = `{"ztAPI": "https://ctrl.example:1280", "id": {"key": "pem:x", "cert": "pem:y", "ca": "pem:z"}}`

// proxyConfig is a hand-built config for transport proxy with the given proxy targets.
func proxyConfig(t *testing.T, tenancyTo, baoTo string) Config {
	return Config{
		Transport: config.TransportProxy,
		Identity:  writeFile(t, "monky-host.env-qa-02.json", []byte(goodIdentity)),
		Tenancy:   Tenancy{Service: "monky.tenancy.deploy", Port: 443, Scheme: "http", ProxyAddr: tenancyTo},
		Bao:       Bao{Service: "openbao", Addr: "https://" + baoName + ":8200", ProxyAddr: baoTo},
	}
}

func get(t *testing.T, hc *http.Client, url string) (string, error) {
	t.Helper()
	resp, err := hc.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// answering is a plain HTTP server, closed when the test ends, that answers every request
// with body.
func answering(t *testing.T, body string) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, body) }))
	t.Cleanup(srv.Close)
	return srv
}

func TestProxyTLSValidatesInterceptName(t *testing.T) {
	ca := newTestCA(t, baoName)
	srv := tlsServer(t, ca)
	caFile := writeFile(t, "openbao-ca.pem", ca.caPEM)
	d, err := New(proxyConfig(t, "127.0.0.1:1", srv.Listener.Addr().String()))
	if err != nil {
		t.Fatal(err)
	}
	if d.Name() != "proxy" {
		t.Fatalf("Name() = %q", d.Name())
	}
	hc, err := HTTPClient(d, baoName, caFile, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	body, err := get(t, hc, "https://"+baoName+":8200/v1/sys/health")
	if err != nil {
		t.Fatalf("https through the proxy mapping: %v", err)
	}
	if body != "ok "+baoName+":8200" {
		t.Fatalf("body %q: the request should carry the intercept name as Host", body)
	}
}

// TestTLSFailures: the transport verifies the certificate for the intercept name against the
// configured CA and passes the verification failure on wrapped (effects.Classify names it); a CA
// file with no certificate is its own *Error, TLS set.
func TestTLSFailures(t *testing.T) {
	ca := newTestCA(t, baoName)
	srv := tlsServer(t, ca)
	caFile := writeFile(t, "openbao-ca.pem", ca.caPEM)
	other := newTestCA(t, baoName)
	otherCA := writeFile(t, "other-ca.pem", other.caPEM)
	garbage := writeFile(t, "garbage.pem", []byte("not a certificate\n"))

	var (
		hostErr x509.HostnameError
		caErr   x509.UnknownAuthorityError
		own     *Error
	)
	cases := []struct {
		name, serverName, caFile string
		is                       func(error) bool
	}{
		{"wrong name", "vault.example.org", caFile, func(err error) bool { return errors.As(err, &hostErr) && hostErr.Host == "vault.example.org" }},
		{"CA file absent", baoName, filepath.Join(t.TempDir(), "missing.pem"), func(err error) bool { return errors.As(err, &caErr) }},
		{"another CA", baoName, otherCA, func(err error) bool { return errors.As(err, &caErr) }},
		{"garbage CA file", baoName, garbage, func(err error) bool {
			return errors.As(err, &own) && own.TLS && own.Code == "TLS_CA_FILE" && strings.Contains(own.Error(), "holds no PEM certificate")
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := proxyConfig(t, "127.0.0.1:1", srv.Listener.Addr().String())
			d, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			hc, err := HTTPClient(d, tc.serverName, tc.caFile, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			_, err = get(t, hc, "https://"+baoName+":8200/v1/sys/health")
			if err == nil {
				t.Fatal("request succeeded; want a TLS failure")
			}
			if !tc.is(err) {
				t.Fatalf("%v (%T) is not the failure wanted", err, errors.Unwrap(err))
			}
		})
	}
}

func TestPlainHTTPNeverReadsCAFile(t *testing.T) {
	srv := answering(t, "plain")
	garbage := writeFile(t, "garbage.pem", []byte("garbage"))
	hc, err := HTTPClient(systemDialer{}, "", garbage, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	body, err := get(t, hc, srv.URL)
	if err != nil || body != "plain" {
		t.Fatalf("plain http with a garbage ca_file: %q %v", body, err)
	}
}

func TestHTTPClientIgnoresProxyEnvironment(t *testing.T) {
	srv := answering(t, "direct")
	t.Setenv("HTTP_PROXY", "http://127.0.0.1:1")
	t.Setenv("http_proxy", "http://127.0.0.1:1")
	t.Setenv("HTTPS_PROXY", "http://127.0.0.1:1")
	t.Setenv("NO_PROXY", "")
	hc, err := HTTPClient(systemDialer{}, "", "", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if hc.Timeout != 5*time.Second {
		t.Fatalf("client timeout %v", hc.Timeout)
	}
	body, err := get(t, hc, srv.URL)
	if err != nil || body != "direct" {
		t.Fatalf("got %q %v; the proxy environment must be ignored", body, err)
	}
}

func TestSystemTransport(t *testing.T) {
	srv := answering(t, "system")
	d, err := New(Config{Transport: config.TransportSystem, Identity: "/nonexistent"})
	if err != nil {
		t.Fatalf("system must not read the identity: %v", err)
	}
	if d.Name() != "system" {
		t.Fatalf("Name() = %q", d.Name())
	}
	hc, _ := HTTPClient(d, "", "", 5*time.Second)
	body, err := get(t, hc, srv.URL+"/v1/agent/checkin")
	if err != nil || body != "system" {
		t.Fatalf("got %q %v", body, err)
	}
}

func TestProxyMapping(t *testing.T) {
	tenancy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "tenancy "+r.Host) }))
	defer tenancy.Close()
	cfg := proxyConfig(t, tenancy.Listener.Addr().String(), "127.0.0.1:18200")
	d, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hc, _ := HTTPClient(d, "", "", 5*time.Second)
	// Host "" is read as the service; names are case-insensitive.
	body, err := get(t, hc, "http://MONKY.tenancy.deploy:443/v1/agent/checkin")
	if err != nil || body != "tenancy MONKY.tenancy.deploy:443" {
		t.Fatalf("got %q %v", body, err)
	}

	_, err = d.DialContext(context.Background(), "tcp", "example.com:443")
	want := "transport proxy: NO_MAPPING: no mapping for example.com:443 (maps bao.cbs.tikali.net:8200 → 127.0.0.1:18200, monky.tenancy.deploy:443 → " + tenancy.Listener.Addr().String() + ")"
	if err == nil || err.Error() != want {
		t.Fatalf("unmapped destination:\n got %v\nwant %s", err, want)
	}
	// The pod's own port is not the intercept port: refused too.
	if _, err := d.DialContext(context.Background(), "tcp", "monky.tenancy.deploy:8081"); err == nil {
		t.Fatal("monky.tenancy.deploy:8081 was dialled; only the intercept port is mapped")
	}
	// Through an HTTP client the refusal keeps its words.
	_, err = get(t, hc, "http://example.com/")
	var e *Error
	if !errors.As(err, &e) || e.Code != "NO_MAPPING" || e.TLS {
		t.Fatalf("through the client: %v", err)
	}
}

func TestProxyHostAndBaseURL(t *testing.T) {
	cfg := proxyConfig(t, "127.0.0.1:18443", "127.0.0.1:18200")
	cfg.Tenancy = Tenancy{BaseURL: "http://tenancy.intercept:8443", ProxyAddr: "127.0.0.1:18443"}
	d, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	to, ok := d.(*proxyDialer).routes.lookup("tenancy.intercept:8443")
	if !ok || to != "127.0.0.1:18443" {
		t.Fatalf("base_url mapping: %q %v", to, ok)
	}
	cfg.Tenancy.ProxyAddr = ""
	if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), "tenancy.proxy_addr is empty") {
		t.Fatalf("empty proxy_addr: %v", err)
	}
}

func TestIdentityFaults(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name, content, want string
	}{
		{"not JSON", "ztAPI=https://x\n", "is not a ziti identity (not JSON: syntax error at byte 1)"},
		{"JSON without keys", `{"name": "monky-host"}`, "is not a ziti identity (JSON without ztAPI and id)"},
		{"JSON without id", `{"ztAPI": "https://ctrl:1280"}`, "is not a ziti identity (JSON without id)"},
		{"JSON array", `[1,2]`, "is not a ziti identity (not a JSON object)"},
		{"empty", ``, "is not a ziti identity (not JSON"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_")+".json")
			if err := os.WriteFile(p, []byte(tc.content), 0o640); err != nil {
				t.Fatal(err)
			}
			checkIdentityError(t, CheckIdentity(p), "identity "+p+" "+tc.want)
		})
	}
	t.Run("absent", func(t *testing.T) {
		p := filepath.Join(dir, "missing.json")
		cfg := proxyConfig(t, "127.0.0.1:18443", "127.0.0.1:18200")
		cfg.Identity = p
		_, err := New(cfg)
		checkIdentityError(t, err, "transport proxy: IDENTITY_UNUSABLE: identity "+p+" does not exist")
	})
	t.Run("a directory", func(t *testing.T) {
		checkIdentityError(t, CheckIdentity(dir), "is not a regular file")
	})
	t.Run("good", func(t *testing.T) {
		p := writeFile(t, "id.json", []byte(goodIdentity))
		if err := CheckIdentity(p); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("unreadable", func(t *testing.T) {
		if os.Geteuid() == 0 {
			t.Skip("running as root: a mode-000 file is still readable, so this fault cannot be provoked")
		}
		p := writeFile(t, "id.json", []byte(goodIdentity))
		if err := os.Chmod(p, 0); err != nil {
			t.Fatal(err)
		}
		err := CheckIdentity(p)
		checkIdentityError(t, err, "identity "+p+" is not readable by this user (uid ")
		for _, w := range []string{"groups ", "usermod -a -G ", " monky-deployd`", "drops POSIX ACLs"} {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("message %q lacks %q", err, w)
			}
		}
	})
	t.Run("never quotes the key", func(t *testing.T) {
		p := writeFile(t, "id.json", []byte(`{"ztAPI": "x", "id": "SECRETKEYMATERIAL"}`))
		err := CheckIdentity(p)
		if err == nil || strings.Contains(err.Error(), "SECRETKEYMATERIAL") {
			t.Fatalf("%v", err)
		}
	})
}

func checkIdentityError(t *testing.T, err error, want string) {
	t.Helper()
	e := testkit.ErrorAs[*Error](t, err)
	if e.TLS || e.Code != "IDENTITY_UNUSABLE" {
		t.Fatalf("tls %v code %q", e.TLS, e.Code)
	}
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("message\n %q\ndoes not contain\n %q", err, want)
	}
}

func TestUnknownTransport(t *testing.T) {
	_, err := New(Config{Transport: "carrier-pigeon"})
	if err == nil || !strings.Contains(err.Error(), `"carrier-pigeon"`) {
		t.Fatalf("got %v", err)
	}
}
