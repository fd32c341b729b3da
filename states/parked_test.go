package states_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tikali/monky-deployd/machine/explain"
)

var recordTrace = flag.Bool("record-trace", false, "write testdata/traces/failed-parked.ndjson (explain's golden input)")

// A failing apply is retried after 2, 4, 8 and 16 minutes, then parks: later ticks fetch
// nothing until resume or a new sha. With -record-trace the history is exported for explain.
func TestAFailingApplyParksAfterFiveAttempts(t *testing.T) {
	h := newHarness(t)
	h.release("v1", nil)
	h.dockerKnob("pull-error", "Error response from daemon: manifest for harbor.example/monky/api:v1 not found: manifest unknown")
	h.failedTicks(5, 16*time.Minute)
	rec := h.record()
	if rec.State != "Failed" || !rec.Parked || rec.TotalAttempts() != 5 {
		t.Fatalf("state %s parked %v attempts %d", rec.State, rec.Parked, rec.TotalAttempts())
	}
	fetches := h.sim.Counts(env).BundleFetches
	h.clock.Advance(time.Hour)
	h.wantExit(h.tick(), 1)
	if h.sim.Counts(env).BundleFetches != fetches {
		t.Errorf("a parked apply was retried")
	}
	doc, err := explain.Build(h.st, explain.Options{Now: h.clock.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(doc.Next, "parked after 5 failed attempts") || !strings.Contains(doc.Next, "resume") {
		t.Errorf("next %q", doc.Next)
	}
	if *recordTrace {
		var b bytes.Buffer
		if err := explain.WriteNDJSON(&b, h.st, h.clock.Now()); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join("..", "testdata", "traces", "failed-parked.ndjson"), b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
