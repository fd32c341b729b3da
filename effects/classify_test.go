package effects

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tikali/monky-deployd/internal/config"
	"github.com/tikali/monky-deployd/transport"
)

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

func TestClassifyNetworkFailures(t *testing.T) {
	// A port where nothing listens.
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := l.Addr().String()
	l.Close()

	// A server that never answers, and one that cuts the answer short.
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	}))
	defer hang.Close()
	cut := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, buf, _ := w.(http.Hijacker).Hijack()
		buf.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort")
		buf.Flush()
		conn.Close()
	}))
	defer cut.Close()
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer plain.Close()

	identity := filepath.Join(t.TempDir(), "id.json")
	if err := os.WriteFile(identity, []byte(`{"ztAPI": "https://ctrl.example:1280", "id": {"key": "pem:x"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	pd, err := transport.New(transport.Config{Transport: config.TransportProxy, Identity: identity,
		Tenancy: transport.Tenancy{Service: "monky.tenancy.deploy", Port: 443, ProxyAddr: dead},
		Bao:     transport.Bao{Addr: "https://bao.cbs.tikali.net:8200", ProxyAddr: "127.0.0.1:18200"}})
	if err != nil {
		t.Fatal(err)
	}
	sd, err := transport.New(transport.Config{Transport: config.TransportSystem})
	if err != nil {
		t.Fatal(err)
	}
	proxyClient, _ := transport.HTTPClient(pd, "", "", 2*time.Second)
	sysClient, _ := transport.HTTPClient(sd, "", "", 300*time.Millisecond)

	t.Run("refused via proxy", func(t *testing.T) {
		_, err := get(t, proxyClient, "http://monky.tenancy.deploy:443/v1/agent/checkin")
		e := Classify("checkin", "monky.tenancy.deploy:443", "proxy", err)
		wantClass(t, e, Temporary, "CONNECTION_REFUSED",
			"checkin: CONNECTION_REFUSED: nothing listens at monky.tenancy.deploy:443 (transport proxy, dialled "+dead+") — check monky-deployd-proxy.service")
	})
	t.Run("refused via system", func(t *testing.T) {
		_, err := get(t, sysClient, "http://"+dead+"/")
		e := Classify("checkin", dead, "system", err)
		wantClass(t, e, Temporary, "CONNECTION_REFUSED", "nothing listens at "+dead+" (transport system) — check the tunneller")
	})
	t.Run("timeout", func(t *testing.T) {
		_, err := get(t, sysClient, hang.URL)
		e := Classify("checkin", "h:1", "system", err)
		wantClass(t, e, Temporary, "TIMEOUT", "no answer from h:1 (transport system) in time")
	})
	t.Run("truncated body", func(t *testing.T) {
		_, err := get(t, sysClient, cut.URL)
		e := Classify("bundle", "h:1", "system", err)
		wantClass(t, e, Temporary, "CONNECTION_RESET", "reset or cut short")
	})
	t.Run("https to a plain server", func(t *testing.T) {
		_, err := get(t, sysClient, strings.Replace(plain.URL, "http:", "https:", 1))
		e := Classify("login", "h:1", "system", err)
		wantClass(t, e, TLS, "TLS_HANDSHAKE", "did not answer TLS")
	})
	t.Run("DNS", func(t *testing.T) {
		err := &net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: "bao.cbs.tikali.net", IsNotFound: true}}
		e := Classify("login", "bao.cbs.tikali.net:8200", "system", err)
		wantClass(t, e, Temporary, "DNS_FAILURE", "cannot resolve bao.cbs.tikali.net for bao.cbs.tikali.net:8200 (transport system): no such host — check the tunneller's DNS intercept")
	})
	t.Run("reset", func(t *testing.T) {
		err := &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
		e := Classify("lease", "h:1", "sdk", err)
		wantClass(t, e, Temporary, "CONNECTION_RESET", "connection to h:1 (transport sdk) was reset or cut short")
	})
	t.Run("nil", func(t *testing.T) {
		if Classify("x", "h:1", "system", nil) != nil {
			t.Fatal("nil error classified as a failure")
		}
	})
}

func wantClass(t *testing.T, e *Error, kind Kind, code, msg string) {
	t.Helper()
	if e == nil {
		t.Fatal("no error")
	}
	if e.Kind != kind || string(e.Code) != code {
		t.Fatalf("kind %v code %q, want %v %q: %v", e.Kind, e.Code, kind, code, e)
	}
	if !strings.Contains(e.Error(), msg) {
		t.Fatalf("message\n %q\ndoes not contain\n %q", e.Error(), msg)
	}
}

// TestClassifyCertificates: each certificate failure is Kind TLS with its own code; the far side
// is named.
func TestClassifyCertificates(t *testing.T) {
	cases := []struct {
		err       error
		code, msg string
	}{
		{x509.HostnameError{Certificate: &x509.Certificate{}, Host: "vault.example.org"}, "TLS_NAME_MISMATCH", "certificate of h:1 (transport proxy) is not valid for vault.example.org"},
		{x509.UnknownAuthorityError{}, "TLS_UNKNOWN_CA", "certificate of h:1 (transport proxy) is signed by an unknown authority — check bao.ca_file"},
		{x509.CertificateInvalidError{Cert: &x509.Certificate{}, Reason: x509.Expired}, "TLS_CERT_INVALID", "certificate of h:1 (transport proxy) is invalid"},
		{tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}, "TLS_HANDSHAKE", "h:1 (transport proxy) did not answer TLS"},
	}
	for _, tc := range cases {
		e := Classify("bao login", "h:1", "proxy", fmt.Errorf("Get: %w", tc.err))
		wantClass(t, e, TLS, tc.code, "bao login: "+tc.code+": "+tc.msg)
		if IsTemporary(e) {
			t.Fatalf("%v: a TLS failure must not be temporary", e)
		}
	}
}

// TestClassifyTransportError: what the transport decided itself keeps its op, code and words;
// TLS set makes it Kind TLS, else Permanent. The op a call names replaces only "tls".
func TestClassifyTransportError(t *testing.T) {
	mapping := &transport.Error{Op: "transport proxy", Code: "NO_MAPPING", Msg: "no mapping for example.com:80"}
	e := Classify("checkin", "example.com:80", "proxy", fmt.Errorf("Get: %w", mapping))
	wantClass(t, e, Permanent, "NO_MAPPING", "transport proxy: NO_MAPPING: no mapping for example.com:80")
	cafile := &transport.Error{Op: "tls", Code: "TLS_CA_FILE", Msg: "CA file x holds no PEM certificate", TLS: true}
	e = Classify("bao login", "h:1", "proxy", cafile)
	wantClass(t, e, TLS, "TLS_CA_FILE", "bao login: TLS_CA_FILE: CA file x holds no PEM certificate")
	cause := errors.New("tenancy.proxy_addr is empty")
	e = Classify("transport", "", "proxy", &transport.Error{Op: "transport proxy", Code: "TRANSPORT_CONFIG", Err: cause})
	wantClass(t, e, Permanent, "TRANSPORT_CONFIG", "transport proxy: TRANSPORT_CONFIG: tenancy.proxy_addr is empty")
	if !errors.Is(e, cause) {
		t.Fatal("the cause is lost")
	}
}

// An https client answered in plain HTTP is a TLS handshake fault, read from Go's typed
// http.ErrSchemeMismatch (wrapped or not), never from its words.
func TestClassifySchemeMismatch(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	defer srv.Close()
	_, err := get(t, &http.Client{Timeout: 5 * time.Second}, "https://"+srv.Listener.Addr().String()+"/")
	if !errors.Is(err, http.ErrSchemeMismatch) {
		t.Fatalf("got %v, want http.ErrSchemeMismatch", err)
	}
	for _, err := range []error{err, fmt.Errorf("checkin: %w", http.ErrSchemeMismatch)} {
		e := Classify("checkin", "h:1", "system", err)
		if e.Kind != TLS || e.Code != "TLS_HANDSHAKE" {
			t.Errorf("%v: kind %v code %s, want a TLS handshake fault", err, e.Kind, e.Code)
		}
	}
}
