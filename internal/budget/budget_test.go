package budget

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The test binary is the child too: these ops run in it, re-executed by Run.
func init() {
	Serve("test-echo", func(req []byte) ([]byte, error) {
		env := strings.Join(os.Environ(), "\n")
		return append(append(req, '\n'), env...), nil
	})
	Serve("test-alloc", func([]byte) ([]byte, error) {
		var keep [][]byte
		for i := 0; i < 64; i++ { // 512 MiB in 8 MiB pieces, each touched
			keep = append(keep, bytes.Repeat([]byte{1}, 8<<20))
		}
		return []byte{byte(len(keep))}, nil
	})
	Serve("test-spin", func([]byte) ([]byte, error) {
		n := 0
		for time.Now().Year() > 0 {
			n++
		}
		return []byte{byte(n)}, nil
	})
	Serve("test-sleep", func([]byte) ([]byte, error) {
		time.Sleep(time.Minute)
		return nil, nil
	})
	Serve("test-fail", func([]byte) ([]byte, error) { return nil, errors.New("the model is odd") })
	Serve("test-die", func([]byte) ([]byte, error) {
		_ = syscall.Kill(os.Getpid(), syscall.SIGTERM)
		time.Sleep(time.Minute)
		return nil, nil
	})
	Serve("test-flood", func([]byte) ([]byte, error) { return bytes.Repeat([]byte("x"), MaxAnswer+1), nil })
}

// The child answers with what it was handed, and sees nothing of the parent's environment but
// its op, its limits, HOME and TMPDIR (and GOMAXPROCS=2).
func TestRunAnswers(t *testing.T) {
	t.Setenv("MONKY_SECRET_OF_THE_PARENT", "s3cr3t")
	t.Setenv("HOME", "/home/someone")
	out, err := Run(context.Background(), "test-echo", []byte("hello"))
	if err != nil {
		t.Fatal(err)
	}
	got := string(out)
	if !strings.HasPrefix(got, "hello\n") || strings.Contains(got, "s3cr3t") || !strings.Contains(got, "HOME=/home/someone") {
		t.Fatalf("answer: %q", got)
	}
	for _, line := range strings.Split(got, "\n")[1:] {
		k, _, _ := strings.Cut(line, "=")
		if k != EnvVar && k != limitsVar && k != "HOME" && k != "TMPDIR" && line != "GOMAXPROCS=2" {
			t.Errorf("the child sees %s", k)
		}
	}
}

// Each bound stops the child and is named; a cancelled context decides nothing.
func TestRunBounds(t *testing.T) {
	defer func(m, c uint64, w time.Duration) { memoryBytes, cpuSeconds, wallTime = m, c, w }(memoryBytes, cpuSeconds, wallTime)
	cpuSeconds, wallTime = 1, 30*time.Second
	for _, c := range []struct {
		op, bound string
	}{
		{"test-alloc", "memory"},
		{"test-spin", "CPU"},
	} {
		_, err := Run(context.Background(), c.op, nil)
		var over *Exceeded
		if !errors.As(err, &over) || over.Bound != c.bound {
			t.Errorf("%s: got %v, want the %s bound", c.op, err, c.bound)
		}
	}

	wallTime = 300 * time.Millisecond
	_, err := Run(context.Background(), "test-sleep", nil)
	var over *Exceeded
	if !errors.As(err, &over) || over.Bound != "time" || !strings.Contains(err.Error(), "time bound") {
		t.Errorf("wall time: got %v", err)
	}
	wallTime = 30 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := Run(ctx, "test-sleep", nil); !errors.As(err, &over) || over.Bound != "time" || !strings.Contains(err.Error(), "deadline") {
		t.Errorf("deadline: got %v", err)
	}
	ctx, cancel = context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, cancel)
	if _, err := Run(ctx, "test-sleep", nil); !errors.Is(err, ErrCancelled) {
		t.Errorf("cancelled: got %v", err)
	}
}

// A child that fails says why in one line, as a loader that did not answer (ErrUnavailable: it
// decides nothing); an answer over MaxAnswer is refused; an op this binary does not serve is not
// started; a binary that is gone is unavailable too.
func TestRunFailures(t *testing.T) {
	if _, err := Run(context.Background(), "test-fail", nil); !errors.Is(err, ErrUnavailable) || !strings.HasSuffix(err.Error(), ": the model is odd") {
		t.Errorf("failure: got %v", err)
	}
	restore := SetExecutable(filepath.Join(t.TempDir(), "gone"))
	_, err := Run(context.Background(), "test-fail", nil)
	restore()
	var over *Exceeded
	if !errors.Is(err, ErrUnavailable) || errors.As(err, &over) {
		t.Errorf("a binary that is gone: got %v", err)
	}
	if _, err := Run(context.Background(), "test-flood", nil); err == nil || !strings.Contains(err.Error(), "over") {
		t.Errorf("flood: got %v", err)
	}
	if _, err := Run(context.Background(), "no-such-op", nil); err == nil {
		t.Error("an unknown op ran")
	}
}

func TestDecode(t *testing.T) {
	var req struct {
		V    int    `json:"v"`
		Name string `json:"name"`
	}
	if err := Decode([]byte(`{"v":2,"name":"x"}`), &req, 2); err != nil || req.Name != "x" {
		t.Errorf("a request of the child's version: %v %+v", err, req)
	}
	for _, raw := range []string{`{"v":1,"name":"x"}`, `{"name":"x"}`, `not json`} {
		if err := Decode([]byte(raw), &req, 2); err == nil {
			t.Errorf("%s: decoded", raw)
		}
	}
}

// A child that dies of a signal no bound explains is not called out of memory because the agent
// that started it holds much memory: the rusage of a child counts the parent's peak, never read
// as the child's own (before, a parent above half the bound made every such death a memory
// verdict, remembered for the release).
func TestParentMemoryIsNotTheChilds(t *testing.T) {
	held := bytes.Repeat([]byte{1}, 2*MemoryBytes) // the parent's peak well above the bound, touched
	_, err := Run(context.Background(), "test-die", nil)
	var over *Exceeded
	if errors.As(err, &over) || !errors.Is(err, ErrUnavailable) {
		t.Fatalf("got %v, want the loader unavailable, not a bound", err)
	}
	if held[len(held)-1] != 1 {
		t.Fatal("unreachable")
	}
}

// The child's own peak is what it says when it answers; without its word, a rusage at or below
// the parent's own peak says nothing of the child.
func TestChildPeak(t *testing.T) {
	if own := childPeak(nil, "budget: peak_kb 5120\n", 1<<40); own != 5120<<10 {
		t.Fatalf("childPeak = %d, want 5 MiB from the child's line", own)
	}
	if own := childPeak(nil, "", selfPeak()); own != 0 {
		t.Fatalf("childPeak with no line and no rusage = %d", own)
	}
}
