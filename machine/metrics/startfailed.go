package metrics

import (
	"fmt"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// Start-failure causes: why a tick stopped before it began (monky_deployd_start_failed's cause).
const (
	CauseConfig = "config" // config.yaml does not load
)

// WriteStartFailed replaces the textfile at path with what a tick that stopped before it began
// can say: monky_deployd_start_failed{cause} 1, and the tick's time (the timer runs: a file
// frozen since the last good tick would read as a stopped timer). env and staleAfter are what
// the config gave, "" and 0 when it gave nothing.
func WriteStartFailed(path, env, cause string, staleAfter time.Duration, at time.Time) error {
	fams := []*dto.MetricFamily{
		newFamily(env, "monky_deployd_last_tick_timestamp_seconds", "When the last tick ended (unix time).", dto.MetricType_GAUGE).
			add(unix(at)).mf,
		newFamily(env, "monky_deployd_start_failed", "1 when the last tick stopped before it began; cause=config: config.yaml does not load (monky-deployd check config).", dto.MetricType_GAUGE).
			add(1, "cause", cause).mf,
	}
	if staleAfter > 0 {
		fams = append(fams, newFamily(env, "monky_deployd_stale_after_seconds", "stale_after_s: a last tick older than this needs a person (the timer is not running).", dto.MetricType_GAUGE).
			add(staleAfter.Seconds()).mf)
	}
	if err := writeTextfile(path, fams); err != nil {
		return fmt.Errorf("metrics: write %s: %w", path, err)
	}
	return nil
}
