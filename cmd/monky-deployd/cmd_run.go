package main

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"
	"go.yaml.in/yaml/v3"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/effects/docker"
	"github.com/tikali/monky-deployd/internal/config"
	"github.com/tikali/monky-deployd/internal/gcpace"
	"github.com/tikali/monky-deployd/internal/logging"
	"github.com/tikali/monky-deployd/internal/phase"
	"github.com/tikali/monky-deployd/internal/version"
	"github.com/tikali/monky-deployd/internal/vocab"
	"github.com/tikali/monky-deployd/machine/explain"
	"github.com/tikali/monky-deployd/machine/metrics"
	"github.com/tikali/monky-deployd/states"
	"github.com/tikali/monky-deployd/store"
)

// runCommand is `run`: one tick (--once), or ticks in a loop until SIGTERM.
func runCommand(stderr io.Writer) *cli.Command {
	return &cli.Command{
		Name:  "run",
		Usage: "run ticks: --once for one (what the systemd timer runs), else loop until SIGTERM",
		Description: "Examples:\n   monky-deployd run --once          # one tick\n   monky-deployd run --once --prune  # and the images no kept release uses\n" +
			"   monky-deployd run                 # loop (laptops without a timer)",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "once", Usage: "run one tick and exit with its code"},
			&cli.BoolFlag{Name: "prune", Usage: "after an apply, also remove the env's images no kept release uses (old releases go after every apply)"},
		},
		Action: func(c *cli.Context) error { return cmdRun(c, stderr) },
	}
}

func cmdRun(c *cli.Context, stderr io.Writer) error {
	phase.Mark("cli")
	cfg, err := loadConfig(c)
	if err != nil {
		if cfg == nil {
			startFailedMetrics(c.String("config"), time.Now())
		}
		return endEarly(newLogger(nil, stderr), vocab.ConfigInvalid, err)
	}
	if err := wrongUser(c, cfg); err != nil {
		return err // an operator's command line, not the timer's tick: the usual line
	}
	log := newLogger(cfg, stderr)
	phase.Mark("config")
	st, err := openStore(cfg, log)
	phase.Mark("store-open")
	if err != nil {
		return endEarly(log, "", err)
	}
	a, err := newAgent(cfg, log, st)
	if err != nil {
		if ee := (*exitError)(nil); errors.As(err, &ee) && ee.cause != nil {
			// the tick's first line: journaled too, so explain and status name it
			return tickExit((&states.Agent{Cfg: cfg, Store: st, Log: log}).RecordStartFailure(ee.cause))
		}
		return endEarly(log, "", err)
	}
	// a user docker's socket refuses: the fix, journaled, before the tick touches anything
	if err := docker.CheckGroup(docker.DefaultSocket); err != nil {
		return tickExit(a.RecordStartFailure(err))
	}
	a.Prune = c.Bool("prune")
	phase.Mark("wire")
	if c.Bool("once") {
		started := time.Now()
		res := a.Tick(context.Background())
		writeMetrics(cfg, st, res, started, log)
		phase.Mark("metrics")
		return tickExit(res)
	}
	return loop(cfg, a, st, log)
}

// endEarly ends a run that failed before its tick began with the closing line a tick has, its
// fields included (states.EndEarly); code "" is the error's own.
func endEarly(log zerolog.Logger, code vocab.Code, err error) error {
	var ee *exitError
	if errors.As(err, &ee) && ee.cause != nil {
		err = ee.cause
	}
	return tickExit(states.EndEarly(log, code, err))
}

// PackageMetricsPath is the metrics_path install.sh, the role and the example set: node_exporter's
// textfile directory, which the package makes and the unit may write.
const PackageMetricsPath = "/var/lib/prometheus/node-exporter/monky_deployd.prom"

// startFailedMetrics says in the textfile that this tick stopped before it began because the
// config at path does not load — a file left frozen since the last good tick would read as a
// stopped timer. The textfile is the one the broken config still names, else the package's
// when a tick wrote it before. A failure to write it is silent: the closing line says why.
func startFailedMetrics(path string, now time.Time) {
	if _, errs := config.LoadAll(path); len(errs) == 0 {
		return // not the config: what stopped the tick is not this one's to say
	}
	// the three keys the textfile needs, read leniently from a file the agent refuses
	var keys map[string]any
	if data, err := os.ReadFile(path); err == nil {
		_ = yaml.Unmarshal(data, &keys)
	}
	prom, _ := keys["metrics_path"].(string)
	env, _ := keys["env_id"].(string)
	staleS, _ := keys["stale_after_s"].(int)
	stale := time.Duration(staleS) * time.Second
	if prom == "" {
		if _, err := os.Stat(PackageMetricsPath); err != nil {
			return
		}
		prom = PackageMetricsPath
	}
	_ = metrics.WriteStartFailed(prom, env, metrics.CauseConfig, stale, now)
}

// writeMetrics writes the node_exporter textfile after a tick when metrics_path is set. A
// failure to write it is logged and never changes the tick's exit code.
func writeMetrics(cfg *config.Config, st store.Store, res states.Result, started time.Time, log zerolog.Logger) {
	if cfg.MetricsPath == "" {
		return
	}
	end := time.Now()
	t := metrics.Tick{Exit: res.Exit, Code: string(effects.CodeOf(res.Err)), Duration: end.Sub(started), EndedAt: end,
		Interval: intervalOf(cfg, res.IntervalS), Version: version.Version, Transports: transportsBuiltIn(), Limits: explain.LimitsOf(cfg)}
	if err := metrics.Write(cfg.MetricsPath, filepath.Join(cfg.StateDir, metrics.CountersFile), st, t); err != nil {
		ev := log.Warn()
		if res.Tick > 0 {
			ev = ev.Uint64(logging.FieldTick, res.Tick)
		}
		ev.Msg(err.Error())
	}
}

// tickExit is the tick's exit code; the tick has logged its closing line already.
func tickExit(res states.Result) error {
	if res.Exit == 0 {
		return nil
	}
	return &exitError{code: res.Exit}
}

// loop runs ticks until SIGTERM or SIGINT, which stop it after the step in flight commits.
// Tenancy's checkin_interval_s wins over interval_s; an env mismatch (78) ends the loop.
func loop(cfg *config.Config, a *states.Agent, st store.Store, log zerolog.Logger) error {
	gcpace.Long() // a process that lives for days: Go's default pace
	stop := make(chan struct{})
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)
	go func() {
		<-sigs
		close(stop)
	}()
	a.Stop = stop
	rnd := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(os.Getpid())))
	if !cfg.LaptopMode {
		// a fleet restarted at once must not check in in step: start somewhere in the interval
		first := time.Duration(rnd.Int64N(int64(intervalOf(cfg, 0))))
		select {
		case <-stop:
			return nil
		case <-time.After(first):
		}
	}
	for {
		started := time.Now()
		res := a.Tick(context.Background())
		writeMetrics(cfg, st, res, started, log)
		if res.Exit == vocab.ExitEnvMismatch {
			return tickExit(res)
		}
		select {
		case <-stop:
			log.Info().Msg("stopping: signal received")
			return nil
		case <-time.After(spread(intervalOf(cfg, res.IntervalS), rnd)):
		}
	}
}

// intervalOf is the loop's interval: tenancy's checkin_interval_s when it gave one, else
// interval_s; at least a second.
func intervalOf(cfg *config.Config, tenancyS int) time.Duration {
	d := time.Duration(cfg.IntervalS) * time.Second
	if tenancyS > 0 {
		d = time.Duration(tenancyS) * time.Second
	}
	return max(d, time.Second)
}

// spread varies d by up to ±10% so agents that drifted apart stay apart; never under a second.
func spread(d time.Duration, rnd *rand.Rand) time.Duration {
	j := d / 10
	if j <= 0 {
		return d
	}
	return max(d-j+time.Duration(rnd.Int64N(int64(2*j))), time.Second)
}
