//go:build cgo

package budget

import (
	"context"
	"os/user"
	"runtime"
	"sync"
	"syscall"
	"testing"
)

// The test binary creates its threads with the C library, as any cgo build does: os/user's
// lookup is cgo's.
var _ = user.Current

func init() {
	Serve("test-threads", func([]byte) ([]byte, error) {
		var wg sync.WaitGroup
		hold := make(chan struct{})
		for i := 0; i < 12; i++ { // each goroutine holds a thread of its own
			wg.Add(1)
			go func() {
				runtime.LockOSThread()
				wg.Done()
				<-hold
			}()
		}
		wg.Wait()
		close(hold)
		return []byte("ok"), nil
	})
}

// A child of a cgo build on a box whose stack limit is large (64 MiB here; 8 MiB is common)
// starts its threads all the same: their stacks are not its memory.
func TestThreadsFitTheBoundWhateverTheStackLimit(t *testing.T) {
	var was syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_STACK, &was); err != nil {
		t.Fatal(err)
	}
	big := was
	big.Cur = min(was.Max, 64<<20)
	if big.Cur < 16<<20 {
		t.Fatalf("the hard stack limit (%d bytes) leaves no room for the case", was.Max)
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_STACK, &big); err != nil {
		t.Fatal(err)
	}
	defer syscall.Setrlimit(syscall.RLIMIT_STACK, &was) //nolint:errcheck // the test's own limit back
	out, err := Run(context.Background(), "test-threads", nil)
	if err != nil || string(out) != "ok" {
		t.Fatalf("a child of 12 threads under a %d MiB stack limit: %q, %v", big.Cur>>20, out, err)
	}
}
