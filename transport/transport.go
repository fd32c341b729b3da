// Package transport is the only place in the agent that opens sockets. It turns the config's
// `transport` (sdk, proxy or system) into a Dialer and builds the HTTP clients tenancy and
// OpenBao are reached with. What it decides itself (no usable transport, an unusable identity,
// an address outside the mapping, a bad CA file) it returns as an *Error; what the network
// returns it passes on wrapped. It does not classify: effects.Classify does, for both.
//
// It may not speak any protocol above HTTP: no tenancy or OpenBao semantics live here, and it
// never logs — errors are returned to the caller, which decides.
package transport

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/tikali/monky-deployd/internal/config"
	"github.com/tikali/monky-deployd/internal/vocab"
)

// Dialer opens the TCP connections of every HTTP call the agent makes.
type Dialer interface {
	DialContext(ctx context.Context, network, addr string) (net.Conn, error)
	// Name is the transport's name as in the config: sdk, proxy or system.
	Name() string
}

// Config is what the transport reads of the agent's config (FromConfig): which transport, the
// box's ziti identity, and how tenancy and OpenBao are reached.
type Config struct {
	Transport string // sdk, proxy or system (config.TransportSDK, …)
	Identity  string // the box's ziti identity file, for sdk and proxy
	Tenancy   Tenancy
	Bao       Bao
}

// Tenancy is where tenancy is reached: its intercept host:port is Host (default Service) and
// Port, falling back to BaseURL's and then to Scheme's port; the proxy transport sends it to
// ProxyAddr, the sdk transport to the ziti service Service.
type Tenancy struct {
	Service, Host   string
	Port            int
	BaseURL, Scheme string
	ProxyAddr       string
}

// Bao is where OpenBao is reached: its intercept host:port is Addr's; the proxy transport sends
// it to ProxyAddr, the sdk transport to the ziti service Service.
type Bao struct {
	Addr, Service, ProxyAddr string
}

// FromConfig is the transport's part of the agent's config.
func FromConfig(c *config.Config) Config {
	t, b := c.Tenancy, c.Bao
	return Config{Transport: c.Transport, Identity: c.Identity,
		Tenancy: Tenancy{Service: t.Service, Host: t.Host, Port: t.Port, BaseURL: t.BaseURL, Scheme: t.Scheme, ProxyAddr: t.ProxyAddr},
		Bao:     Bao{Addr: b.Addr, Service: b.Service, ProxyAddr: b.ProxyAddr}}
}

// New builds the Dialer the config asks for. For sdk and proxy it first checks that the box's
// ziti identity is usable (CheckIdentity), before anything touches the mesh.
func New(cfg Config) (Dialer, error) {
	switch cfg.Transport {
	case config.TransportSystem:
		return systemDialer{}, nil
	case config.TransportProxy:
		if err := checkIdentity(config.TransportProxy, cfg.Identity); err != nil {
			return nil, err
		}
		return newProxy(cfg)
	case config.TransportSDK:
		return newSDK(cfg)
	case "":
		return nil, &Error{Op: "transport", Code: vocab.TransportUnknown,
			Msg: "no transport configured; set `transport: sdk`, `proxy` or `system`"}
	}
	return nil, &Error{Op: "transport", Code: vocab.TransportUnknown,
		Msg: fmt.Sprintf("unknown transport %q; set `transport: sdk`, `proxy` or `system`", cfg.Transport)}
}

// systemDialer dials the configured names with the system resolver and TCP stack; the
// tunneller's intercepts (DNS and routes) put the mesh underneath.
type systemDialer struct{}

func (systemDialer) Name() string { return config.TransportSystem }

func (systemDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}

// route is one fixed destination of the proxy (or sdk) transport.
type route struct {
	from string // intercept host:port, lower-case host
	to   string // proxy address, or ziti service name
}

// routes is the fixed mapping of the two destinations the agent talks to.
type routes []route

func (rs routes) lookup(addr string) (string, bool) {
	key := normHostPort(addr)
	for _, r := range rs {
		if r.from == key {
			return r.to, true
		}
	}
	return "", false
}

func (rs routes) String() string {
	parts := make([]string, 0, len(rs))
	for _, r := range rs {
		parts = append(parts, r.from+" → "+r.to)
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// refuse is the error for a destination outside the mapping.
func (rs routes) refuse(transport, addr string) error {
	return &Error{Op: "transport " + transport, Code: vocab.NoMapping,
		Msg: fmt.Sprintf("no mapping for %s (maps %s)", addr, rs)}
}

// tenancyHostPort is tenancy's intercept host:port: tenancy.host (default tenancy.service) and
// tenancy.port, falling back to tenancy.base_url and then to the scheme's port.
func tenancyHostPort(cfg Config) (string, error) {
	host, port := cfg.Tenancy.Host, cfg.Tenancy.Port
	if host == "" {
		host = cfg.Tenancy.Service
	}
	if (host == "" || port == 0) && cfg.Tenancy.BaseURL != "" {
		h, p, err := urlHostPort(cfg.Tenancy.BaseURL)
		if err != nil {
			return "", fmt.Errorf("tenancy.base_url: %w", err)
		}
		if host == "" {
			host = h
		}
		if port == 0 {
			port = p
		}
	}
	if port == 0 {
		port = schemePort(cfg.Tenancy.Scheme)
	}
	if host == "" {
		return "", fmt.Errorf("tenancy.service and tenancy.host are empty")
	}
	return normHostPort(net.JoinHostPort(host, strconv.Itoa(port))), nil
}

// baoHostPort is OpenBao's intercept host:port from bao.addr.
func baoHostPort(cfg Config) (string, error) {
	h, p, err := urlHostPort(cfg.Bao.Addr)
	if err != nil {
		return "", fmt.Errorf("bao.addr: %w", err)
	}
	return normHostPort(net.JoinHostPort(h, strconv.Itoa(p))), nil
}

func urlHostPort(raw string) (string, int, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", 0, err
	}
	if u.Hostname() == "" {
		return "", 0, fmt.Errorf("%q has no host", raw)
	}
	port := schemePort(u.Scheme)
	if ps := u.Port(); ps != "" {
		port, err = strconv.Atoi(ps)
		if err != nil {
			return "", 0, fmt.Errorf("%q: bad port", raw)
		}
	}
	return u.Hostname(), port, nil
}

func schemePort(scheme string) int {
	if strings.EqualFold(scheme, "https") {
		return 443
	}
	return 80
}

// normHostPort lower-cases the host of host:port (names are case-insensitive).
func normHostPort(addr string) string {
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return strings.ToLower(addr)
	}
	return net.JoinHostPort(strings.ToLower(strings.TrimSuffix(h, ".")), p)
}

// proxyDialer sends each of the two intercept names to its local port of
// monky-deployd-proxy.service and refuses everything else.
type proxyDialer struct{ routes routes }

func newProxy(cfg Config) (Dialer, error) {
	rs, err := fixedRoutes(cfg, cfg.Tenancy.ProxyAddr, cfg.Bao.ProxyAddr, "proxy_addr")
	if err != nil {
		return nil, &Error{Op: "transport proxy", Code: vocab.TransportConfig, Err: err}
	}
	return &proxyDialer{routes: rs}, nil
}

// fixedRoutes maps tenancy's and OpenBao's intercept host:port to the two targets.
func fixedRoutes(cfg Config, tenancyTo, baoTo, what string) (routes, error) {
	t, err := tenancyHostPort(cfg)
	if err != nil {
		return nil, err
	}
	b, err := baoHostPort(cfg)
	if err != nil {
		return nil, err
	}
	if tenancyTo == "" {
		return nil, fmt.Errorf("tenancy.%s is empty", what)
	}
	if baoTo == "" {
		return nil, fmt.Errorf("bao.%s is empty", what)
	}
	return routes{{from: t, to: tenancyTo}, {from: b, to: baoTo}}, nil
}

func (*proxyDialer) Name() string { return config.TransportProxy }

func (p *proxyDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	to, ok := p.routes.lookup(addr)
	if !ok {
		return nil, p.routes.refuse(config.TransportProxy, addr)
	}
	var d net.Dialer
	return d.DialContext(ctx, network, to)
}
