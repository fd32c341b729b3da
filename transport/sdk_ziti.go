//go:build ziti

// The sdk transport, built only with -tags ziti: `make sdk` builds it against the OpenZiti SDK
// (github.com/openziti/sdk-golang) with a modfile of its own, never this module's go.mod.
//
// It dials ziti services by name with the box's identity: tenancy's intercept host:port goes to
// tenancy.service, OpenBao's to bao.service; anything else is refused. The SDK is handled as
// untrusted: it sees only an identity loadSDKIdentity checked, and a panic inside a call the
// agent makes into it is caught and becomes a TRANSPORT_IDENTITY error, never a crashed tick.

package transport

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"time"

	"github.com/openziti/edge-api/rest_client_api_client/authentication"
	"github.com/openziti/identity"
	edgeapis "github.com/openziti/sdk-golang/edge-apis"
	"github.com/openziti/sdk-golang/ziti"

	"github.com/tikali/monky-deployd/internal/config"
	"github.com/tikali/monky-deployd/internal/vocab"
)

type sdkDialer struct {
	zctx   ziti.Context
	routes routes // intercept host:port → ziti service name
	who    string // the identity's name as its file says it (monky-host.<env>.json), for the words
}

func newSDK(cfg Config) (Dialer, error) {
	id, err := loadSDKIdentity(cfg.Identity)
	if err != nil {
		return nil, err
	}
	rs, err := fixedRoutes(cfg, cfg.Tenancy.Service, cfg.Bao.Service, "service")
	if err != nil {
		return nil, &Error{Op: "transport sdk", Code: vocab.TransportConfig, Err: err}
	}
	zctx, err := sdkContext(cfg.Identity, id)
	if err != nil {
		return nil, err
	}
	return &sdkDialer{zctx: zctx, routes: rs, who: strings.TrimSuffix(filepath.Base(cfg.Identity), ".json")}, nil
}

// sdkContext hands the checked identity to the SDK. The identity is loaded here, eagerly: the
// SDK's own lazy loader ends the process on an error instead of returning it.
func sdkContext(path string, id *sdkIdentity) (zctx ziti.Context, err error) {
	defer recoverSDK("loading identity "+path, &err)
	zid, err := identity.LoadIdentity(identity.Config{Cert: "pem:" + id.Cert, Key: "pem:" + id.Key, CA: "pem:" + id.CA})
	if err != nil {
		return nil, &Error{Op: "transport sdk", Code: vocab.TransportIdentity,
			Msg: fmt.Sprintf("the OpenZiti SDK refused identity %s: %s", path, sdkWords(err)), Hint: identityHint}
	}
	creds := edgeapis.NewIdentityCredentials(zid)
	creds.ConfigTypes = id.ConfigTypes
	zctx, err = ziti.NewContext(&ziti.Config{ZtAPI: id.ZtAPI, ZtAPIs: id.ZtAPIs, ConfigTypes: id.ConfigTypes, Credentials: creds})
	if err != nil {
		return nil, &Error{Op: "transport sdk", Code: vocab.TransportIdentity,
			Msg: fmt.Sprintf("the OpenZiti SDK could not start with identity %s: %s", path, sdkWords(err)), Hint: identityHint}
	}
	return zctx, nil
}

func (*sdkDialer) Name() string { return config.TransportSDK }

// DialContext dials the service mapped to addr with the call's context and its deadline
// (DefaultTimeout when it has none) as the SDK's connect timeout. A dial the SDK does not give
// up when the context ends is abandoned, and its connection closed when it arrives.
func (s *sdkDialer) DialContext(ctx context.Context, _, addr string) (net.Conn, error) {
	svc, ok := s.routes.lookup(addr)
	if !ok {
		return nil, s.routes.refuse(config.TransportSDK, addr)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultTimeout)
		defer cancel()
	}
	dl, _ := ctx.Deadline()
	if err := ctx.Err(); err != nil {
		return nil, dialFault(svc, s.who, err)
	}
	type result struct {
		c   net.Conn
		err error
	}
	ch := make(chan result, 1)
	go func() {
		var r result
		defer func() { ch <- r }()
		defer recoverSDK("dialling service "+svc, &r.err)
		c, err := s.zctx.DialContextWithOptions(ctx, svc, &ziti.DialOptions{ConnectTimeout: time.Until(dl)})
		if err == nil && c != nil {
			r.c = c
		}
		r.err = err
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			return nil, dialFault(svc, s.who, r.err)
		}
		if r.c == nil {
			return nil, dialFault(svc, s.who, errors.New("the SDK returned no connection and no error"))
		}
		return r.c, nil
	case <-ctx.Done():
		go func() {
			if r := <-ch; r.c != nil {
				r.c.Close()
			}
		}()
		return nil, dialFault(svc, s.who, ctx.Err())
	}
}

// dialFault maps what the SDK's dial returned to the transport's words: a caught panic and a
// controller that refuses the identity are TRANSPORT_IDENTITY; a service the controller does not
// offer the identity who is MESH_NO_SERVICE; a deadline or a cancel keeps
// context's error in its chain (effects.Classify: TIMEOUT, CANCELLED); anything else is a
// *net.OpError of network "ziti" (UNREACHABLE: the service could not be reached over the mesh).
func dialFault(svc, who string, err error) error {
	var te *Error
	var unauth *authentication.AuthenticateUnauthorized
	switch {
	case errors.As(err, &te):
		return err
	case errors.As(err, &unauth), loginRefused(err):
		return &Error{Op: "transport sdk", Code: vocab.TransportIdentity,
			Msg:  fmt.Sprintf("the controller refused the box's identity dialling service %s", svc),
			Hint: "the identity was deleted or revoked at the controller, or its certificate expired: enrol the box again from a fresh enrolment JWT (monky-deployd enroll --force --jwt FILE)"}
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return fmt.Errorf("ziti service %s: %w", svc, err)
	case strings.Contains(err.Error(), "service '"+svc+"' not found"):
		// the SDK's answer when the controller lists no such service for the identity: no Dial
		// policy names it, or the service was deleted. Asking again does not change it.
		return &Error{Op: "transport sdk", Code: vocab.MeshNoService,
			Msg:  fmt.Sprintf("the controller offers no service %s to the box's identity %s", svc, who),
			Hint: fmt.Sprintf("at the controller: ziti edge policy-advisor identities %s %s (a Dial policy for the identity, or the service, is missing)", who, svc)}
	}
	return &net.OpError{Op: "dial", Net: "ziti", Err: fmt.Errorf("service %s: %s", svc, sdkWords(err))}
}

// loginRefused: the controller answered the identity's login 401 — the identity deleted or its
// enrolment revoked at the controller, or its certificate expired. SDK v1.7.0 returns it
// untyped (edge-apis' OIDC login: fmt.Errorf("credential submission failed with status %d"),
// wrapped with %v by ensureApiSession), so its fixed words are the only evidence there is; the
// legacy login's typed AuthenticateUnauthorized is read by type. Asking again does not change it:
// a person's, not a temporary fault (make mesh-e2e deletes the identity).
func loginRefused(err error) bool {
	return strings.Contains(err.Error(), "credential submission failed with status 401")
}

// recoverSDK turns a panic inside an SDK call into a TRANSPORT_IDENTITY *Error in *err. Only a
// panic on the calling goroutine can be caught: one in a goroutine the SDK starts itself ends
// the process, as any would.
func recoverSDK(what string, err *error) {
	r := recover()
	if r == nil {
		return
	}
	*err = &Error{Op: "transport sdk", Code: vocab.TransportIdentity,
		Msg:  fmt.Sprintf("the OpenZiti SDK failed %s (it panicked: %s; the panic was caught)", what, sdkWords(fmt.Errorf("%v", r))),
		Hint: identityHint}
}

// sdkWords is the SDK's message for err on one line, unless it quotes PEM (the identity's key
// may be in it): then it says so instead.
func sdkWords(err error) string {
	s := err.Error()
	if strings.Contains(s, "-----BEGIN") || strings.Contains(s, "pem:") {
		return "(its words quote the identity's PEM and are not repeated)"
	}
	return strings.Join(strings.Fields(s), " ")
}
