package main

import (
	"bytes"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

	"github.com/tikali/monky-deployd/internal/config"
)

// Loop mode ticks at tenancy's checkin_interval_s and stops on SIGTERM with exit 0 after the
// step in flight is committed.
func TestLoopFollowsTheIntervalAndStopsOnSIGTERM(t *testing.T) {
	b := startBox(t, "--interval", "1", "--kit-interval", "1")
	b.Desire("v1")
	cmd := b.Command("monky-deployd", "--config", b.Config(), "run")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	deadline := time.Now().Add(20 * time.Second)
	for b.Counts().Checkins < 4 {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("fewer than 4 check-ins in 20 s with a 1 s interval:\n%s", stderr.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("loop ended with %v after SIGTERM:\n%s", err, stderr.String())
		}
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		t.Fatal("loop did not stop within 10 s of SIGTERM")
	}
	if d := b.explainJSON(); d.State != "Reported" {
		t.Errorf("after the loop: state %q", d.State)
	}
}

func TestSpreadStaysWithinTenPercentAndAboveASecond(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	seen := map[time.Duration]bool{}
	for i := 0; i < 1000; i++ {
		d := spread(60*time.Second, rnd)
		if d < 54*time.Second || d >= 66*time.Second {
			t.Fatalf("spread(60s) = %v", d)
		}
		seen[d] = true
		if s := spread(time.Second, rnd); s < time.Second {
			t.Fatalf("spread(1s) = %v", s)
		}
	}
	if len(seen) < 100 {
		t.Errorf("spread hardly varies: %d distinct waits in 1000", len(seen))
	}
	if d := intervalOf(&config.Config{IntervalS: 60}, 0); d != time.Minute {
		t.Errorf("interval_s: %v", d)
	}
	if d := intervalOf(&config.Config{IntervalS: 60}, 5); d != 5*time.Second {
		t.Errorf("tenancy's checkin_interval_s must win: %v", d)
	}
	if d := intervalOf(&config.Config{IntervalS: 0}, 0); d != time.Second {
		t.Errorf("floor: %v", d)
	}
}
