package docker

import (
	"testing"

	"github.com/tikali/monky-deployd/internal/vocab"
)

// The registry's words are read once, here, into a typed cause; nothing after the effect
// reads them.
func TestPullReason(t *testing.T) {
	for out, want := range map[string]vocab.Reason{
		`Error response from daemon: Head "https://harbor.example/v2/monky/api/manifests/1": no basic auth credentials`:                vocab.ReasonRegistryDenied,
		`Error response from daemon: pull access denied for monky/api, repository does not exist or may require 'docker login'`:        vocab.ReasonRegistryDenied,
		`Error response from daemon: unauthorized: authentication required`:                                                            vocab.ReasonRegistryDenied,
		`Error response from daemon: manifest for harbor.example/monky/api:v9 not found: manifest unknown: manifest unknown`:           vocab.ReasonImageMissing,
		`Error response from daemon: Get "https://harbor.example/v2/": dial tcp: lookup harbor.example on 127.0.0.53:53: no such host`: vocab.ReasonRegistryDNS,
		`Error response from daemon: Get "https://harbor.example/v2/": dial tcp 10.0.0.9:443: i/o timeout`:                             vocab.ReasonNetwork,
		`Error response from daemon: Get "https://harbor.example/v2/": net/http: TLS handshake timeout`:                                vocab.ReasonNetwork,
		`something no one has seen`: "",
	} {
		if got := PullReason(out); got != want {
			t.Errorf("%q: %q, want %q", out, got, want)
		}
	}
}
