//go:build ziti

// The sdk transport, built only with -tags ziti. The Makefile target `sdk` builds it:
//
//	go get github.com/openziti/sdk-golang && go build -tags ziti ./cmd/monky-deployd
//
// It dials ziti services by name with the box's identity: tenancy's intercept host:port goes to
// tenancy.service, OpenBao's to bao.service; anything else is refused.

package transport

import (
	"context"
	"net"

	"github.com/openziti/sdk-golang/ziti"

	"github.com/tikali/monky-deployd/internal/config"
	"github.com/tikali/monky-deployd/internal/vocab"
)

type sdkDialer struct {
	zctx   ziti.Context
	routes routes // intercept host:port → ziti service name
}

func newSDK(cfg Config) (Dialer, error) {
	if err := checkIdentity(config.TransportSDK, cfg.Identity); err != nil {
		return nil, err
	}
	rs, err := fixedRoutes(cfg, cfg.Tenancy.Service, cfg.Bao.Service, "service")
	if err != nil {
		return nil, &Error{Op: "transport sdk", Code: vocab.TransportConfig, Err: err}
	}
	zcfg, err := ziti.NewConfigFromFile(cfg.Identity)
	if err != nil {
		return nil, &Error{Op: "transport sdk", Code: vocab.IdentityUnusable, Err: err}
	}
	zctx, err := ziti.NewContext(zcfg)
	if err != nil {
		return nil, &Error{Op: "transport sdk", Code: vocab.IdentityUnusable, Err: err}
	}
	return &sdkDialer{zctx: zctx, routes: rs}, nil
}

func (*sdkDialer) Name() string { return config.TransportSDK }

// DialContext dials the service mapped to addr. ziti's Dial takes no context, so a cancelled
// context abandons the dial and closes its connection when it arrives.
func (s *sdkDialer) DialContext(ctx context.Context, _, addr string) (net.Conn, error) {
	svc, ok := s.routes.lookup(addr)
	if !ok {
		return nil, s.routes.refuse(config.TransportSDK, addr)
	}
	type result struct {
		c   net.Conn
		err error
	}
	ch := make(chan result, 1)
	go func() {
		c, err := s.zctx.Dial(svc)
		if err != nil {
			ch <- result{nil, err}
			return
		}
		ch <- result{c, nil}
	}()
	select {
	case r := <-ch:
		return r.c, r.err
	case <-ctx.Done():
		go func() {
			if r := <-ch; r.c != nil {
				r.c.Close()
			}
		}()
		return nil, ctx.Err()
	}
}
