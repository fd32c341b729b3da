package main

import (
	"os"
	"strings"
	"testing"
)

// A config broken after the box ticked: the tick stops before it begins and the textfile says
// so (start_failed, cause config, the tick's time), instead of keeping the last good tick's
// numbers until the stale alert blames the timer.
func TestABrokenConfigSaysSoInTheTextfile(t *testing.T) {
	b := startBox(t)
	prom := b.metricsFile()
	b.tick(0)
	b.AppendConfig("stale_after_s: 600\nmetrics_pth: /nowhere\n")
	_, e, code := b.agent("run", "--once")
	if code != 1 || !strings.Contains(e, "CONFIG_INVALID") || !strings.Contains(e, `unknown key \"metrics_pth\"`) {
		t.Fatalf("run --once: exit %d\n%s", code, e)
	}
	raw, err := os.ReadFile(prom)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{
		`monky_deployd_start_failed{cause="config",env="` + b.Env + `"} 1`,
		`monky_deployd_stale_after_seconds{env="` + b.Env + `"} 600`,
		`monky_deployd_last_tick_timestamp_seconds{env="` + b.Env + `"} `,
	} {
		if !strings.Contains(string(raw), w) {
			t.Errorf("the textfile lacks %q:\n%s", w, raw)
		}
	}
	if strings.Contains(string(raw), "monky_deployd_converged") {
		t.Errorf("the textfile still reads the last good tick:\n%s", raw)
	}
}
