package states_test

import (
	"testing"

	"github.com/tikali/monky-deployd/machine"
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
