package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// Addrs are the base URLs a served simulator answers on: the document monky-sim serve writes
// with --addr-file.
type Addrs struct {
	Tenancy string `json:"tenancy"`
	Bao     string `json:"bao"`
	Admin   string `json:"admin"`
}

// WriteFile writes a to path as one line of JSON, atomically: whoever waits for the file finds
// it whole.
func (a Addrs) WriteFile(path string) error {
	b, err := json.Marshal(a)
	if err != nil {
		return err
	}
	return writeFileAtomic(path, append(b, '\n'), 0o644)
}

// Servers are the simulator's three HTTP servers, tenancy, OpenBao and the admin API, each on
// a listener of its own.
type Servers struct {
	Addrs Addrs
	lns   []net.Listener
	srvs  []*http.Server
}

// Listen opens the listeners of the three servers (host:port; port 0 picks a free one) and
// points the check-in's vault hint, the lease answers and the admin API's kits at them.
// Nothing is served before Serve.
func (s *Sim) Listen(tenancy, bao, admin string) (*Servers, error) {
	sv := &Servers{}
	for _, spec := range []struct {
		name, addr string
		h          http.Handler
	}{{"tenancy", tenancy, s.TenancyHandler()}, {"bao", bao, s.BaoHandler()}, {"admin", admin, s.AdminHandler()}} {
		ln, err := net.Listen("tcp", spec.addr)
		if err != nil {
			sv.Close()
			return nil, fmt.Errorf("listen %s: %w", spec.name, err)
		}
		sv.lns = append(sv.lns, ln)
		sv.srvs = append(sv.srvs, &http.Server{Handler: spec.h, ReadHeaderTimeout: 10 * time.Second})
	}
	sv.Addrs = Addrs{
		Tenancy: "http://" + sv.lns[0].Addr().String(),
		Bao:     "http://" + sv.lns[1].Addr().String(),
		Admin:   "http://" + sv.lns[2].Addr().String(),
	}
	s.SetTenancyAddr(sv.Addrs.Tenancy)
	s.SetBaoAddr(sv.Addrs.Bao)
	return sv, nil
}

// Serve serves until ctx is done or a server fails, then shuts the three down, waiting 5 s at
// most for the requests in flight.
func (sv *Servers) Serve(ctx context.Context) error {
	errc := make(chan error, len(sv.srvs))
	for i, srv := range sv.srvs {
		go func() { errc <- srv.Serve(sv.lns[i]) }()
	}
	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-errc:
	}
	shutCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	for _, srv := range sv.srvs {
		_ = srv.Shutdown(shutCtx)
	}
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", serveErr)
	}
	return nil
}

// Close closes the listeners; after Serve it changes nothing.
func (sv *Servers) Close() {
	for _, ln := range sv.lns {
		_ = ln.Close()
	}
}
