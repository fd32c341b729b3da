package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tikali/monky-deployd/internal/testkit"
)

// The collector's pace (internal/gcpace) is set before the libraries' heavy package inits, in
// the agent as the package ships it: GODEBUG=inittrace=1 lists gcpace's init before those of
// compose's JSON schema package (about 1.7 MB at start) and OpenBao's client.
func TestTheCollectorsPaceIsSetBeforeTheHeavyInits(t *testing.T) {
	cmd := exec.Command(filepath.Join(testkit.BinDir(), "monky-deployd"), "version")
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("monky-deployd version: %v\n%s", err, out)
	}
	at := map[string]int{}
	for i, l := range strings.Split(string(out), "\n") {
		if f := strings.Fields(l); len(f) > 1 && f[0] == "init" {
			at[f[1]] = i + 1
		}
	}
	pace := at["github.com/tikali/monky-deployd/internal/gcpace"]
	if pace == 0 {
		t.Fatalf("no init of internal/gcpace in the trace:\n%s", out)
	}
	for _, heavy := range []string{"github.com/santhosh-tekuri/jsonschema/v6", "github.com/hashicorp/vault/api"} {
		if at[heavy] == 0 || at[heavy] < pace {
			t.Errorf("%s initialises at line %d of the trace, gcpace at %d: want gcpace first", heavy, at[heavy], pace)
		}
	}
}
