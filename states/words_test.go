package states_test

import (
	"context"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/tikali/monky-deployd/effects/files"
	"github.com/tikali/monky-deployd/machine"
	"github.com/tikali/monky-deployd/store"
)

// TestSizeInBinaryUnits: a need of 1 PiB reads as PiB with the exact bytes, never as
// "1073741824 MiB".
func TestSizeInBinaryUnits(t *testing.T) {
	for n, want := range map[int64]string{
		512:            "512 bytes",
		1 << 20:        "1.00 MiB (1048576 bytes)",
		3 << 29:        "1.50 GiB (1610612736 bytes)",
		1 << 50:        "1.00 PiB (1125899906842624 bytes)",
		5 << 40:        "5.00 TiB (5497558138880 bytes)",
		2147483648 + 1: "2.00 GiB (2147483649 bytes)",
	} {
		if got := machine.Size(n); got != want {
			t.Errorf("Size(%d) = %q, want %q", n, got, want)
		}
	}
}

// noRemove is the real filesystem where one file cannot be removed (a read-only directory,
// as root cannot be made to see one).
type noRemove struct {
	files.FS
	path string
}

func (f noRemove) Remove(p string) error {
	if p == f.path {
		return &os.PathError{Op: "remove", Path: p, Err: syscall.EROFS}
	}
	return f.FS.Remove(p)
}

// TestGrantConsumedOnlyWhenItIs: a bootstrap grant that could not be deleted is not called
// "consumed (deleted)": the journal says it was emptied instead.
func TestGrantConsumedOnlyWhenItIs(t *testing.T) {
	h := newHarness(t)
	h.release("v1", nil)
	a := h.agent()
	a.FS = noRemove{FS: files.OS, path: h.cfg.BootstrapPath}
	if res := a.Tick(context.Background()); res.Exit != 0 {
		t.Fatalf("exit %d: %v", res.Exit, res.Err)
	}
	e, ok := h.entry(func(e store.Entry) bool { return e.Event == "bootstrap" })
	if !ok || strings.Contains(e.Detail, "(deleted)") || !strings.Contains(e.Detail, "emptied") {
		t.Errorf("bootstrap entry %q", e.Detail)
	}
	if b, err := os.ReadFile(h.cfg.BootstrapPath); err != nil || len(b) != 0 {
		t.Errorf("the grant file: %q, %v", b, err)
	}
}

// TestStageSaysWhetherTheRegistryCredentialWasWrittenOrKept: the stage line names the
// registry credential written, and a later release without one says the one there is kept.
func TestStageSaysWhetherTheRegistryCredentialWasWrittenOrKept(t *testing.T) {
	h := newHarness(t)
	h.sim.PutSecret(env, "registry", map[string]string{"value": "robot$pull:canary-reg-pw"})
	h.release("v1", withRegistryAuth)
	h.wantExit(h.tick(), 0)
	e, _ := h.entry(func(e store.Entry) bool { return e.Event == "stage" })
	if !strings.Contains(e.Detail, "registry credential written to "+h.cfg.DockerConfigDir()+"/config.json") {
		t.Errorf("stage after a registry-auth entry: %q", e.Detail)
	}
	h.apply("v2")
	e, _ = h.entry(func(e store.Entry) bool { return e.Event == "stage" })
	if !strings.Contains(e.Detail, "no registry-auth entry: the registry credential already in") || !strings.Contains(e.Detail, "is kept") {
		t.Errorf("stage without a registry-auth entry: %q", e.Detail)
	}
	if strings.Contains(e.Detail, "canary-reg-pw") {
		t.Errorf("a secret in the journal: %q", e.Detail)
	}
}
