package version

import (
	"runtime"
	"slices"
	"testing"

	"github.com/tikali/monky-deployd/internal/config"
)

func TestGetNamesTheBuild(t *testing.T) {
	old := Commit
	t.Cleanup(func() { Commit = old })
	Commit = "0123456789ab"
	i := Get()
	if i.Version != Version || i.Commit != "0123456789ab" || i.Go != runtime.Version() {
		t.Fatalf("Get() = %+v", i)
	}
	if !slices.Contains(i.Transports, i.DefaultTransport) {
		t.Fatalf("default transport %q is not built in: %v", i.DefaultTransport, i.Transports)
	}
	if slices.Contains(i.Transports, config.TransportSDK) != config.SDKBuiltIn {
		t.Fatalf("transports %v but SDKBuiltIn=%v", i.Transports, config.SDKBuiltIn)
	}
	Commit = ""
	if c := Get().Commit; c == "" {
		t.Fatal("an unset commit must still say something (the recorded vcs revision or unknown)")
	}
}
