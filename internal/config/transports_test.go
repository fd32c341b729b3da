package config

import (
	"strings"
	"testing"
)

// The default transport is one this build can dial with: a box installed with the defaults
// must not fail every tick on a transport the package does not carry.
func TestDefaultTransportFollowsTheBuild(t *testing.T) {
	want := TransportSystem
	if SDKBuiltIn {
		want = TransportSDK
	}
	if got := DefaultTransport(); got != want {
		t.Fatalf("DefaultTransport() = %q in a build with SDKBuiltIn=%v, want %q", got, SDKBuiltIn, want)
	}
	if !TransportBuiltIn(DefaultTransport()) {
		t.Fatalf("the default transport %q is not among the built-in ones %v", DefaultTransport(), BuiltInTransports())
	}
	c := parse(t, minimal)
	if c.Transport != want {
		t.Fatalf("a config without `transport` got %q, want %q", c.Transport, want)
	}
	if TransportBuiltIn(TransportSDK) != SDKBuiltIn {
		t.Fatalf("sdk built in = %v, SDKBuiltIn = %v", TransportBuiltIn(TransportSDK), SDKBuiltIn)
	}
	for _, tr := range []string{TransportProxy, TransportSystem} {
		if !TransportBuiltIn(tr) {
			t.Errorf("%s is always built in", tr)
		}
	}
}

// A config naming the sdk transport still parses in a build without the SDK: the refusal
// (with its hint) is the tick's, so `explain` and `status` can name it.
func TestExplicitSDKParsesInEveryBuild(t *testing.T) {
	c := parse(t, minimal+"transport: sdk\n")
	if c.Transport != TransportSDK {
		t.Fatalf("transport %q", c.Transport)
	}
	if strings.Join(BuiltInTransports(), ",") == "" {
		t.Fatal("no transport built in")
	}
}
