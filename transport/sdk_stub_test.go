//go:build !ziti

package transport

import (
	"errors"
	"strings"
	"testing"

	"github.com/tikali/monky-deployd/internal/config"
)

func TestSDKUnavailableInDefaultBuild(t *testing.T) {
	cfg := proxyConfig(t, "127.0.0.1:18443", "127.0.0.1:18200")
	cfg.Transport = config.TransportSDK
	_, err := New(cfg)
	var e *Error
	if !errors.As(err, &e) || e.Code != "SDK_UNAVAILABLE" || e.TLS {
		t.Fatalf("got %v", err)
	}
	msg := err.Error()
	if strings.Contains(msg, "\n") {
		t.Fatalf("message is more than one line: %q", msg)
	}
	for _, w := range []string{"transport sdk:", "this build has no OpenZiti SDK", "`transport: proxy` (monky-deployd-proxy.service)", "`transport: system`"} {
		if !strings.Contains(msg, w) {
			t.Errorf("message %q lacks %q", msg, w)
		}
	}
}
