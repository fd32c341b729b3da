// Package registry runs go-containerregistry's in-memory registry on 127.0.0.1 behind HTTP
// basic auth, and builds and pushes the e2e suite's test images without docker build: one
// layer holding a static test binary, a config whose HEALTHCHECK runs that binary, no base
// image.
//
// It is for the e2e suites only (make e2e, and make systemd-e2e through cmd/monky-e2e-engine). It
// may not print the password it guards.
package registry

import (
	"archive/tar"
	"bytes"
	"crypto/subtle"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// DeniedMessage is what the registry answers a request without the right password: the
// words a failed pull must carry into the agent's report.
const DeniedMessage = "monky-e2e registry: wrong username or password"

// Registry is a started registry.
type Registry struct {
	Host     string // 127.0.0.1:<port>, as image references name it
	User     string
	Password string
	srv      *http.Server
}

// Start serves a registry on 127.0.0.1 that wants user/password on every request, until t ends.
func Start(t testing.TB, user, password string, logTo io.Writer) *Registry {
	t.Helper()
	r, err := Serve(user, password, logTo)
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// Serve serves a registry on 127.0.0.1 that wants user/password on every request, until Close.
func Serve(user, password string, logTo io.Writer) (*Registry, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("registry listen: %w", err)
	}
	inner := registry.New(registry.Logger(log.New(logTo, "registry: ", log.LstdFlags)))
	r := &Registry{Host: ln.Addr().String(), User: user, Password: password}
	r.srv = &http.Server{Handler: r.guard(inner), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = r.srv.Serve(ln) }()
	return r, nil
}

// Close stops serving.
func (r *Registry) Close() error { return r.srv.Close() }

// guard answers 401 with a Basic challenge and a registry error body unless the request
// carries user:password.
func (r *Registry) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		u, p, ok := req.BasicAuth()
		if !ok || subtle.ConstantTimeCompare([]byte(u), []byte(r.User)) != 1 ||
			subtle.ConstantTimeCompare([]byte(p), []byte(r.Password)) != 1 {
			w.Header().Set("WWW-Authenticate", `Basic realm="monky-e2e"`)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprintf(w, `{"errors":[{"code":"UNAUTHORIZED","message":%q,"detail":null}]}`+"\n", DeniedMessage)
			return
		}
		next.ServeHTTP(w, req)
	})
}

// Image describes one test image.
type Image struct {
	Repo string   // e.g. monky-e2e/app
	Tag  string   // e.g. 1
	Env  []string // baked into the config, e.g. APP_VERSION=1
}

// Push builds img from the static binary at binPath (installed as /app, the entrypoint,
// and `/app -health` the HEALTHCHECK) and pushes it. It returns the full reference.
func (r *Registry) Push(binPath string, img Image) (string, error) {
	bin, err := os.ReadFile(binPath)
	if err != nil {
		return "", fmt.Errorf("push: %w", err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: "app", Mode: 0o755, Size: int64(len(bin)), Typeflag: tar.TypeReg,
		ModTime: time.Unix(0, 0)}); err != nil {
		return "", fmt.Errorf("push: %w", err)
	}
	if _, err := tw.Write(bin); err != nil {
		return "", fmt.Errorf("push: %w", err)
	}
	if err := tw.Close(); err != nil {
		return "", fmt.Errorf("push: %w", err)
	}
	layerBytes := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerBytes)), nil
	})
	if err != nil {
		return "", fmt.Errorf("push: layer: %w", err)
	}
	im, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return "", fmt.Errorf("push: %w", err)
	}
	cf, err := im.ConfigFile()
	if err != nil {
		return "", fmt.Errorf("push: %w", err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	cf.Config.Entrypoint = []string{"/app"}
	cf.Config.Env = append([]string{"PATH=/"}, img.Env...)
	cf.Config.Healthcheck = &v1.HealthConfig{
		Test:     []string{"CMD", "/app", "-health"},
		Interval: time.Second, Timeout: 2 * time.Second, Retries: 3, StartPeriod: time.Second,
	}
	if im, err = mutate.ConfigFile(im, cf); err != nil {
		return "", fmt.Errorf("push: %w", err)
	}
	ref := r.Host + "/" + img.Repo + ":" + img.Tag
	tag, err := name.NewTag(ref, name.Insecure)
	if err != nil {
		return "", fmt.Errorf("push: %w", err)
	}
	if err := remote.Write(tag, im, remote.WithAuth(&authn.Basic{Username: r.User, Password: r.Password})); err != nil {
		return "", fmt.Errorf("push %s: %w", ref, err)
	}
	return ref, nil
}
