package effects

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"syscall"

	"github.com/tikali/monky-deployd/internal/config"
	"github.com/tikali/monky-deployd/internal/vocab"
	"github.com/tikali/monky-deployd/transport"
)

// Classify turns a transport-level failure of op towards hostport (the intercept host:port)
// over the transport named via into an *Error whose message names both and says what to check.
// Refused, DNS, timeout and reset/truncated are Temporary (the next tick may succeed); a
// certificate problem is Kind TLS (retrying cannot fix a wrong CA). A *transport.Error in err's
// chain (a fault the transport decided itself) keeps its op, code and words, Kind TLS when it
// is one, else Permanent; an *Error already in err's chain is returned as it is. nil stays nil.
func Classify(op, hostport, via string, err error) *Error {
	if err == nil {
		return nil
	}
	if e := classified(op, err); e != nil {
		return e
	}
	where := fmt.Sprintf("%s (transport %s%s)", hostport, via, dialled(err, hostport))
	e := &Error{Op: op, Err: err}
	if !classifyTLS(e, err, where) {
		classifyNet(e, err, where, via)
	}
	return e
}

// classified is the *Error in err's chain (with op when it has none or is the TLS layer's), or
// the *Error a *transport.Error in it makes; nil when err's chain holds neither.
func classified(op string, err error) *Error {
	var ee *Error
	if errors.As(err, &ee) {
		if ee.Op == "" || ee.Op == "tls" {
			c := *ee
			c.Op = op
			return &c
		}
		return ee
	}
	var te *transport.Error
	if errors.As(err, &te) {
		e := &Error{Op: te.Op, Kind: Permanent, Code: te.Code, Msg: te.Msg, Hint: te.Hint, Err: te.Err}
		if te.TLS {
			e.Kind = TLS
		}
		if e.Op == "" || e.Op == "tls" {
			e.Op = op
		}
		return e
	}
	return nil
}

// classifyTLS fills e's kind, code, message and hint when err is a certificate or handshake
// failure talking to where, and says whether it was one.
func classifyTLS(e *Error, err error, where string) bool {
	var (
		hostErr x509.HostnameError
		caErr   x509.UnknownAuthorityError
		invErr  x509.CertificateInvalidError
		recErr  tls.RecordHeaderError
		alert   tls.AlertError
	)
	switch {
	case errors.As(err, &hostErr):
		e.Kind, e.Code = TLS, vocab.TLSNameMismatch
		e.Msg = fmt.Sprintf("certificate of %s is not valid for %s", where, hostErr.Host)
		e.Hint = "check bao.addr / the intercept name"
	case errors.As(err, &caErr):
		e.Kind, e.Code = TLS, vocab.TLSUnknownCA
		e.Msg = fmt.Sprintf("certificate of %s is signed by an unknown authority", where)
		e.Hint = "check bao.ca_file (tenancy.ca_file for tenancy over https): it must hold the CA that signed this certificate"
	case errors.As(err, &invErr):
		e.Kind, e.Code = TLS, vocab.TLSCertInvalid
		e.Msg = fmt.Sprintf("certificate of %s is invalid: %v", where, invErr)
		e.Hint = "check the server's certificate (expiry, usage) and the box's clock"
	case errors.As(err, &recErr), errors.Is(err, http.ErrSchemeMismatch):
		e.Kind, e.Code = TLS, vocab.TLSHandshake
		e.Msg = fmt.Sprintf("%s did not answer TLS", where)
		e.Hint = "check the scheme (http or https) of bao.addr / tenancy.scheme"
	case errors.As(err, &alert):
		e.Kind, e.Code = TLS, vocab.TLSHandshake
		e.Msg = fmt.Sprintf("TLS handshake with %s failed: %v", where, alert)
		e.Hint = "check the server's TLS setup"
	default:
		return false
	}
	return true
}

// classifyNet fills e's kind, code, message and hint for err, a failure that is not TLS's
// talking to where over the transport named via: the network ones Temporary, the rest Permanent.
func classifyNet(e *Error, err error, where, via string) {
	var (
		dnsErr *net.DNSError
		opErr  *net.OpError
		netErr net.Error
	)
	switch {
	case errors.As(err, &dnsErr):
		e.Kind, e.Code = Temporary, vocab.DNSFailure
		e.Msg = fmt.Sprintf("cannot resolve %s for %s: %s", dnsErr.Name, where, dnsErr.Err)
		e.Hint = hint(via, "check the tunneller's DNS intercept (ziti-edge-tunnel) and the name in the config")
	case errors.Is(err, syscall.ECONNREFUSED):
		e.Kind, e.Code = Temporary, vocab.ConnectionRefused
		e.Msg = fmt.Sprintf("nothing listens at %s", where)
		e.Hint = hint(via, "check the tunneller (ziti-edge-tunnel) and the service's intercept")
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		e.Kind, e.Code = Temporary, vocab.ConnectionReset
		e.Msg = fmt.Sprintf("connection to %s was reset or cut short", where)
		e.Hint = hint(via, "check the tunneller and the far side's health")
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded),
		errors.As(err, &netErr) && netErr.Timeout():
		e.Kind, e.Code = Temporary, vocab.Timeout
		e.Msg = fmt.Sprintf("no answer from %s in time", where)
		e.Hint = hint(via, "check the tunneller and the far side's health")
	case errors.Is(err, context.Canceled):
		e.Kind, e.Code = Temporary, vocab.Cancelled
		e.Msg = fmt.Sprintf("call to %s was cancelled", where)
	case errors.As(err, &opErr):
		e.Kind, e.Code = Temporary, vocab.Unreachable
		e.Msg = fmt.Sprintf("cannot reach %s: %v", where, opErr.Err)
		e.Hint = hint(via, "check the tunneller and the mesh")
	default:
		e.Kind = Permanent
		e.Msg = fmt.Sprintf("%s: %v", where, err)
	}
	if e.Kind == Temporary {
		e.Reason = vocab.ReasonNetwork
	}
}

// hint points a proxy-transport failure at the proxy unit, the others at the tunneller.
func hint(via, other string) string {
	if via == config.TransportProxy {
		return "check monky-deployd-proxy.service (systemctl status monky-deployd-proxy)"
	}
	return other
}

// dialled is ", dialled 127.0.0.1:18443" when the socket went somewhere else than hostport.
func dialled(err error, hostport string) string {
	var opErr *net.OpError
	if errors.As(err, &opErr) && opErr.Addr != nil {
		if a := opErr.Addr.String(); a != hostport {
			return ", dialled " + a
		}
	}
	return ""
}
