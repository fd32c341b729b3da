package transport

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"sync"
	"time"

	"github.com/tikali/monky-deployd/internal/vocab"
)

// DefaultTimeout is used when HTTPClient is given no timeout.
const DefaultTimeout = 30 * time.Second

// maxTLSHandshake bounds a TLS handshake when the call's timeout is longer.
const maxTLSHandshake = 10 * time.Second

// HTTPClient builds an HTTP/1.1 client whose every connection goes through d.
//
// The environment's proxy settings are ignored (HTTP_PROXY and friends never apply). For https
// the certificate is verified for serverName — the intercept name, even when the TCP connection
// goes to 127.0.0.1 — against the CA in caFile when that file exists, else the system roots.
// The TLS configuration is built at the first https request, so a plain-http client never reads
// caFile; an unreadable or garbage caFile then fails that request with an *Error, TLS set,
// Code TLS_CA_FILE. timeout bounds each whole call.
func HTTPClient(d Dialer, serverName, caFile string, timeout time.Duration) (*http.Client, error) {
	if d == nil {
		return nil, fmt.Errorf("http client: no dialer")
	}
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	hs := min(timeout, maxTLSHandshake)
	lt := &lazyTLS{serverName: serverName, caFile: caFile}
	tr := &http.Transport{
		Proxy:       nil,
		DialContext: d.DialContext,
		DialTLSContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			cfg, err := lt.config(addr)
			if err != nil {
				return nil, err
			}
			raw, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			hctx, cancel := context.WithTimeout(ctx, hs)
			defer cancel()
			c := tls.Client(raw, cfg)
			if err := c.HandshakeContext(hctx); err != nil {
				raw.Close()
				return nil, err
			}
			return c, nil
		},
		ForceAttemptHTTP2:     false,
		TLSHandshakeTimeout:   hs,
		ResponseHeaderTimeout: timeout,
		ExpectContinueTimeout: time.Second,
		IdleConnTimeout:       90 * time.Second,
		MaxIdleConns:          4,
		MaxIdleConnsPerHost:   2,
	}
	return &http.Client{Transport: named{Transport: tr, name: d.Name()}, Timeout: timeout}, nil
}

// named is an http.Transport that knows its dialer's name, for error messages.
type named struct {
	*http.Transport
	name string
}

// Name is the transport name of a client built by HTTPClient ("sdk", "proxy", "system"),
// "unknown" for any other client.
func Name(hc *http.Client) string {
	if hc != nil {
		if n, ok := hc.Transport.(named); ok {
			return n.name
		}
	}
	return "unknown"
}

// lazyTLS builds the client TLS config at the first https dial and keeps it once built.
type lazyTLS struct {
	serverName, caFile string

	mu    sync.Mutex
	roots *x509.CertPool
	built bool
}

func (l *lazyTLS) config(addr string) (*tls.Config, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.built {
		roots, err := loadRoots(l.caFile)
		if err != nil {
			return nil, err
		}
		l.roots, l.built = roots, true
	}
	name := l.serverName
	if name == "" {
		if h, _, err := net.SplitHostPort(addr); err == nil {
			name = h
		} else {
			name = addr
		}
	}
	return &tls.Config{ServerName: name, RootCAs: l.roots, MinVersion: tls.VersionTLS12}, nil
}

// loadRoots reads the CA file: nil (system roots) when there is none.
func loadRoots(caFile string) (*x509.CertPool, error) {
	if caFile == "" {
		return nil, nil
	}
	pem, err := os.ReadFile(caFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, &Error{Op: "tls", TLS: true, Code: vocab.TLSCAFile,
			Msg: fmt.Sprintf("CA file %s is unreadable: %v", caFile, errors.Unwrap(err)), Err: err}
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, &Error{Op: "tls", TLS: true, Code: vocab.TLSCAFile,
			Msg: fmt.Sprintf("CA file %s holds no PEM certificate", caFile)}
	}
	return pool, nil
}

// HostPort is the host:port a URL dials, the scheme's default port filled in.
func HostPort(u *url.URL) string {
	if u.Port() != "" {
		return u.Host
	}
	if u.Scheme == "https" {
		return net.JoinHostPort(u.Hostname(), "443")
	}
	return net.JoinHostPort(u.Hostname(), "80")
}
