package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/signal"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/effects/disk"
	"github.com/tikali/monky-deployd/effects/docker"
	"github.com/tikali/monky-deployd/effects/tenancy"
	"github.com/tikali/monky-deployd/internal/config"
	"github.com/tikali/monky-deployd/internal/explain"
	"github.com/tikali/monky-deployd/internal/logging"
	"github.com/tikali/monky-deployd/internal/metrics"
	"github.com/tikali/monky-deployd/internal/phase"
	"github.com/tikali/monky-deployd/internal/redact"
	"github.com/tikali/monky-deployd/internal/version"
	"github.com/tikali/monky-deployd/machine"
	"github.com/tikali/monky-deployd/states"
	"github.com/tikali/monky-deployd/store"
	"github.com/tikali/monky-deployd/transport"
)

// exitError carries an exit code out of a command without exiting inside the cli library
// (which would skip every deferred close).
type exitError struct {
	code  int
	msg   string
	cause error // what stopped a tick before it started, journaled by run
}

func (e *exitError) Error() string { return e.msg }
func (e *exitError) Unwrap() error { return e.cause }

func fail(code int, format string, args ...any) error {
	return &exitError{code: code, msg: fmt.Sprintf(format, args...)}
}

// run is main without os.Exit: it returns the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	app := newApp(stdout, stderr)
	app.Metadata = map[string]any{"args": args}
	if words, ok := completionRequest(args); ok {
		// answered from the definitions: no command's action is reachable from here
		for _, w := range completions(app, words) {
			fmt.Fprintln(stdout, w)
		}
		return 0
	}
	err := app.Run(args)
	if err == nil {
		return 0
	}
	// the closing line: under journald it carries its priority like every log line
	prefix := ""
	if f, ok := stderr.(*os.File); ok {
		if journald, _ := logging.Detect(f); journald {
			prefix = "<3>"
		}
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.msg != "" {
			fmt.Fprintln(stderr, prefix+"monky-deployd: "+redact.String(ee.msg))
		}
		return ee.code
	}
	// what else the cli library answers (help for no such topic) is a usage error too
	fmt.Fprintln(stderr, prefix+"monky-deployd: "+redact.String(usageLine("", flagErrorWords(strings.TrimSpace(err.Error()))).Error()))
	return 1
}

func newApp(stdout, stderr io.Writer) *cli.App {
	app := &cli.App{
		Name:        "monky-deployd",
		Usage:       "the on-box pull agent for Monky backend environments",
		Description: appDescription,
		Version:     version.Version,
		Writer:      stdout,
		ErrWriter:   stderr,
		HideVersion: true, // --version below runs the version command
		// completion is answered by run() before the library sees the arguments: the library's
		// own --generate-bash-completion stays off so no action can be reached through it
		EnableBashCompletion: false,
		ExitErrHandler:       func(*cli.Context, error) {},
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "config", Value: config.DefaultPath, EnvVars: []string{"MONKY_DEPLOYD_CONFIG"}, Usage: "the agent's config.yaml"},
			&cli.BoolFlag{Name: "version", Usage: "print the version (the same as monky-deployd version)"},
		},
		Action: func(c *cli.Context) error {
			if c.Bool("version") {
				return c.App.Command("version").Action(c)
			}
			if c.NArg() > 0 {
				return usageErr(c, "unknown command %q", c.Args().First())
			}
			return cli.ShowAppHelp(c)
		},
		Commands: []*cli.Command{
			{
				Name:  "run",
				Usage: "run ticks: --once for one (what the systemd timer runs), else loop until SIGTERM",
				Description: "Examples:\n   monky-deployd run --once          # one tick\n   monky-deployd run --once --prune  # and the images no kept release uses\n" +
					"   monky-deployd run                 # loop (laptops without a timer)",
				Flags: []cli.Flag{
					&cli.BoolFlag{Name: "once", Usage: "run one tick and exit with its code"},
					&cli.BoolFlag{Name: "prune", Usage: "after an apply, also remove the env's images no kept release uses (old releases go after every apply)"},
				},
				Action: func(c *cli.Context) error { return cmdRun(c, stderr) },
			},
			{
				Name:      "status",
				Usage:     "where the box stands (read-only)",
				ArgsUsage: "[FILE|DIR ...]",
				Description: "Exit status: 0 when the box is converged or working on it (in flight, retrying, waiting on\n" +
					"   the lease budget, a temporary fault younger than stuck_after_s); 1 when it needs a person\n" +
					"   (Refused, Blocked, a parked Failed, an unhealthy service, a fault every tick repeats, a\n" +
					"   temporary fault older than stuck_after_s, no tick for stale_after_s) or the state file is\n" +
					"   missing or unreadable.\n\n" +
					"Examples:\n   monky-deployd status\n   monky-deployd status --json | jq .lease_budget\n" +
					"   monky-deployd status --quiet || echo 'this box needs a person'\n" +
					"   monky-deployd status --state-file ./state.db   # a copy a box sent to support; no config needed\n" +
					"   monky-deployd status --state-file ./copies/    # many copies: one line per box, who needs a person first",
				Flags: []cli.Flag{
					&cli.BoolFlag{Name: "json", Usage: "one JSON document on stdout"},
					&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "print nothing; only the exit status says whether the box needs a person"},
					&cli.StringFlag{Name: "state-file", Usage: "read this copy of a state file instead of the config's (as of its newest tick; writes nothing); several files or a directory of copies: one line per box, the ones that need a person first"},
					&cli.StringFlag{Name: "as-of", Usage: "with --state-file FILE: read the copy as of this RFC 3339 time (when the box sent it) instead of its newest tick, so a box whose timer stopped reads stale"},
				},
				Action: func(c *cli.Context) error {
					if c.Bool("quiet") {
						return quiet(cmdStatus(c, io.Discard))
					}
					return cmdStatus(c, stdout)
				},
			},
			{
				Name:  "explain",
				Usage: "why the box is where it is: the last ticks' transitions and what happens next",
				Description: "Examples:\n   monky-deployd explain\n   monky-deployd explain -n 5 --json\n" +
					"   monky-deployd explain --state-file ./state.db   # a copy a box sent to support; no config needed\n" +
					"   monky-deployd explain --ndjson > journal.ndjson  # the whole journal, to attach to a ticket",
				Flags: []cli.Flag{
					&cli.BoolFlag{Name: "json", Usage: "one JSON document on stdout (schema v1, with `why`)"},
					&cli.BoolFlag{Name: "ndjson", Usage: "every journal entry, one JSON object per line, for a post-mortem or a ticket"},
					&cli.IntFlag{Name: "n", Value: 20, Usage: "how many ticks"},
					&cli.DurationFlag{Name: "since", Usage: "only ticks of the last DURATION (e.g. 1h)"},
					&cli.StringFlag{Name: "state-file", Usage: "read this copy of a state file instead of the config's"},
					&cli.StringFlag{Name: "as-of", Usage: "with --state-file: read the copy as of this RFC 3339 time (when the box sent it) instead of its newest tick"},
				},
				Action: func(c *cli.Context) error { return cmdExplain(c, stdout) },
			},
			{
				Name:        "resume",
				Usage:       "after a manual fix: clear what parked the machine (refused, failed, blocked)",
				Description: "Examples:\n   monky-deployd resume          # the next tick checks again\n   monky-deployd resume --now    # and run that tick now",
				Flags: []cli.Flag{
					&cli.BoolFlag{Name: "now", Usage: "also run one tick now"},
					&cli.BoolFlag{Name: "dry-run", Usage: "say what would be cleared; change nothing"},
				},
				Action: func(c *cli.Context) error { return cmdResume(c, stdout, stderr) },
			},
			{
				Name:        "bootstrap",
				Usage:       "log in to OpenBao with the bootstrap grant and store the token",
				Description: "Examples:\n   monky-deployd bootstrap          # only when no token is stored\n   monky-deployd bootstrap --force  # replace a working token with the grant's",
				Flags:       []cli.Flag{&cli.BoolFlag{Name: "force", Usage: "log in even when a token is stored"}},
				Action:      func(c *cli.Context) error { return cmdBootstrap(c, stdout, stderr) },
			},
			{
				Name:        "diagram",
				Usage:       "print the state machine as a mermaid diagram",
				Description: "Examples:\n   monky-deployd diagram > machine.mmd\n   monky-deployd diagram | mmdc -i - -o machine.svg",
				Action:      func(c *cli.Context) error { fmt.Fprint(stdout, machine.Mermaid()); return nil },
			},
			checkCommand(stdout),
			versionCommand(stdout),
			completionCommand(stdout),
		},
	}
	if man := manCommand(stdout); man != nil {
		app.Commands = append(app.Commands, man)
	}
	strict(app)
	return app
}

// appDescription is the man page's DESCRIPTION and the top-level --help's.
const appDescription = `Each tick checks in with monky-tenancy over the OpenZiti mesh with the box's own host identity,
fetches the rendered bundle, leases a deploy grant, logs in to OpenBao, reads the environment's
secrets, converges the box with docker compose, and reports. The systemd timer
monky-deployd.timer runs one tick (run --once) every minute.

Exit status: 0 converged, heartbeat sent, or another tick holds the lock; 75 temporary (the
next tick resumes); 78 AGENT_ENV_MISMATCH (never retried); 1 a refusal, a failure, a block, a
TLS or identity fault, a usage or config error. Files, environment: monky-deployd(8).`

func loadConfig(c *cli.Context) (*config.Config, error) {
	cfg, err := config.Load(c.String("config"))
	if err != nil {
		return nil, fail(1, "%v", err)
	}
	return cfg, nil
}

func openStore(cfg *config.Config, log zerolog.Logger) (*store.Bolt, error) {
	if err := os.MkdirAll(cfg.StateDir, 0o700); err != nil {
		return nil, fail(1, "state dir: %v", err)
	}
	// nothing is read from or written through a state_dir or state.db the agent cannot trust
	if err := states.CheckTrust(cfg); err != nil {
		return nil, fail(1, "%v", err)
	}
	st, err := store.OpenBolt(cfg.StatePath(), store.BoltOptions{Logf: func(f string, a ...any) { log.Warn().Msgf(f, a...) }})
	if err != nil {
		return nil, fail(1, "state file: %v", err)
	}
	return st, nil
}

func newLogger(cfg *config.Config, stderr io.Writer) zerolog.Logger {
	opts := logging.Options{NoColor: os.Getenv("NO_COLOR") != ""}
	if f, ok := stderr.(*os.File); ok {
		opts.Journald, opts.Human = logging.Detect(f)
	}
	level := "INFO"
	if cfg != nil {
		level = cfg.LogLevel
	}
	l := logging.Setup(stderr, level, opts)
	if cfg != nil && cfg.EnvID != "" {
		l = l.With().Str(logging.FieldEnv, cfg.EnvID).Logger()
	}
	return l
}

// newAgent wires the effects for cfg: the transport's dialer under both clients, the docker
// CLI, the disk. A transport that cannot work (no SDK in this build, an unusable identity)
// fails here, before anything touches the mesh.
func newAgent(cfg *config.Config, log zerolog.Logger, st store.Store) (*states.Agent, error) {
	d, err := transport.New(cfg)
	if err != nil {
		return nil, &exitError{code: 1, msg: err.Error(), cause: err}
	}
	host := cfg.Tenancy.Host
	if host == "" {
		host = cfg.Tenancy.Service
	}
	thc, err := transport.HTTPClient(d, host, cfg.Tenancy.CAFile, cfg.TenancyTimeout())
	if err != nil {
		return nil, fail(1, "tenancy client: %v", err)
	}
	baoHost, _ := cfg.BaoHostPort()
	bhc, err := transport.HTTPClient(d, baoHost, cfg.Bao.CAFile, cfg.BaoTimeout())
	if err != nil {
		return nil, fail(1, "OpenBao client: %v", err)
	}
	tc := tenancy.New(cfg.TenancyBaseURL(), thc, d.Name(), time.Now)
	tc.Version = version.Version
	bc, err := newBao(cfg, bhc)
	if err != nil {
		return nil, fail(1, "OpenBao client: %v", err)
	}
	hostname, _ := os.Hostname()
	return &states.Agent{
		Cfg: cfg, Store: st, Log: log, Host: hostname, Version: version.Version,
		Fx: states.Effects{Tenancy: tc, Bao: bc, Compose: docker.New(cfg.DockerBin, cfg.ComposeProject, cfg.DockerConfigDir()), Disk: disk.Statfs{}},
	}, nil
}

// geteuid is the process's effective uid (a test stands in for root).
var geteuid = os.Geteuid

// wrongUser refuses a state-changing command run as root while state_dir belongs to another
// user (the agent's): it would leave root-owned files there (bao.token, state.db, releases)
// that the timer's ticks, run as that user, cannot read. It runs before anything is touched and
// names the command to run instead. A state_dir that root owns (or that does not exist yet) is
// not refused.
func wrongUser(c *cli.Context, cfg *config.Config) error {
	if geteuid() != 0 {
		return nil
	}
	fi, err := os.Stat(cfg.StateDir)
	if err != nil {
		return nil
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || st.Uid == 0 {
		return nil
	}
	name := strconv.Itoa(int(st.Uid))
	if u, err := user.LookupId(name); err == nil {
		name = u.Username
	}
	cmdline := "monky-deployd"
	if args, ok := c.App.Metadata["args"].([]string); ok && len(args) > 1 {
		cmdline += " " + strings.Join(args[1:], " ")
	}
	return fail(1, "state_dir %s belongs to %s and this runs as root, which would leave root-owned files the agent cannot read: run it as the agent's user: sudo -u %s %s",
		cfg.StateDir, name, name, cmdline)
}

// setup reads the config and opens the state file for a command that changes state.
func setup(c *cli.Context, stderr io.Writer) (*config.Config, zerolog.Logger, *store.Bolt, error) {
	cfg, err := loadConfig(c)
	if err != nil {
		return nil, zerolog.Nop(), nil, err
	}
	if err := wrongUser(c, cfg); err != nil {
		return nil, zerolog.Nop(), nil, err
	}
	log := newLogger(cfg, stderr)
	phase.Mark("config")
	st, err := openStore(cfg, log)
	phase.Mark("store-open")
	return cfg, log, st, err
}

func cmdRun(c *cli.Context, stderr io.Writer) error {
	phase.Mark("cli")
	cfg, log, st, err := setup(c, stderr)
	if err != nil {
		return err
	}
	a, err := newAgent(cfg, log, st)
	if err != nil {
		if ee := (*exitError)(nil); errors.As(err, &ee) && ee.cause != nil {
			// the tick's first line: journaled too, so explain and status name it
			(&states.Agent{Cfg: cfg, Store: st, Log: log}).RecordStartFailure(ee.cause)
		}
		return err
	}
	// a user docker's socket refuses: the fix, journaled, before the tick touches anything
	if err := docker.CheckGroup(docker.Socket()); err != nil {
		a.RecordStartFailure(err)
		return &exitError{code: 1, msg: err.Error(), cause: err}
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

// writeMetrics writes the node_exporter textfile after a tick when metrics_path is set. A
// failure to write it is logged and never changes the tick's exit code.
func writeMetrics(cfg *config.Config, st store.Store, res states.Result, started time.Time, log zerolog.Logger) {
	if cfg.MetricsPath == "" {
		return
	}
	end := time.Now()
	t := metrics.Tick{Exit: res.Exit, Code: effects.CodeOf(res.Err), Duration: end.Sub(started), EndedAt: end,
		Interval: intervalOf(cfg, res.IntervalS), Version: version.Version, Transports: transportsBuiltIn(), Limits: explain.LimitsOf(cfg)}
	if err := metrics.Write(cfg.MetricsPath, filepath.Join(cfg.StateDir, metrics.CountersFile), st, t); err != nil {
		ev := log.Warn()
		if res.Tick > 0 {
			ev = ev.Uint64(logging.FieldTick, res.Tick)
		}
		ev.Msg(redact.String(err.Error()))
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
		if res.Exit == states.ExitEnvMismatch {
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

func cmdStatus(c *cli.Context, stdout io.Writer) error {
	if path := c.String("state-file"); path != "" {
		if more := c.Args().Slice(); triageWanted(path, more) {
			paths, asJSON := triageArgs(path, more, c.Bool("json"))
			return statusCopies(paths, asJSON, stdout) // triage.go
		}
		return statusCopy(c, path, stdout)
	}
	if c.NArg() > 0 {
		return usageErr(c, "unexpected argument %q", c.Args().First())
	}
	cfg, err := loadConfig(c)
	if err != nil {
		return err
	}
	st, err := store.OpenBolt(cfg.StatePath(), store.BoltOptions{ReadOnly: true})
	if err != nil {
		if os.IsNotExist(errors.Unwrap(err)) || errors.Is(err, os.ErrNotExist) {
			return fail(1, "no state file at %s: no tick has run yet%s", cfg.StatePath(), privateTmp(cfg.StateDir))
		}
		return corruptOr(err, cfg.StatePath())
	}
	_, terr := os.Stat(cfg.TokenPath())
	present := terr == nil
	lim := explain.LimitsOf(cfg)
	lim.TickRunning = states.TickRunning(cfg.LockPath())
	s, err := explain.BuildStatusWith(st, time.Now(), &present, lim)
	if err != nil {
		return fail(1, "status: %v", err)
	}
	if c.Bool("json") {
		if err := writeJSON(stdout, s); err != nil {
			return err
		}
		return statusExit(s)
	}
	var b strings.Builder
	explain.WriteStatusText(&b, s)
	fmt.Fprint(stdout, redact.String(b.String()))
	return statusExit(s)
}

// asOf is --as-of: the time a copy is read as of (zero: its newest tick). Only with
// --state-file: the box's own file is read as of now.
func asOf(c *cli.Context) (time.Time, error) {
	v := c.String("as-of")
	if v == "" {
		return time.Time{}, nil
	}
	if c.String("state-file") == "" {
		return time.Time{}, usageErr(c, "--as-of reads a copy: give --state-file FILE")
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, usageErr(c, "--as-of %q is not an RFC 3339 time (2026-12-01T14:05:00Z)", v)
	}
	return t, nil
}

// statusCopy is `status --state-file`: a copy read as of its newest tick, with no config, no
// lock file and nothing about the machine that reads it (its token, its lock).
func statusCopy(c *cli.Context, path string, stdout io.Writer) error {
	if _, err := os.Stat(path); err != nil {
		return fail(1, "no state file at %s: %v", path, err)
	}
	st, err := store.OpenBolt(path, store.BoltOptions{ReadOnly: true})
	if err != nil {
		return fail(1, "state file %s: %v", path, err)
	}
	at, err := asOf(c)
	if err != nil {
		return err
	}
	s, err := explain.BuildStatusCopyAsOf(st, at)
	if err != nil {
		return fail(1, "status: %v", err)
	}
	if c.Bool("json") {
		if err := writeJSON(stdout, s); err != nil {
			return err
		}
		return statusExit(s)
	}
	var b strings.Builder
	explain.WriteStatusText(&b, s)
	fmt.Fprint(stdout, redact.String(b.String()))
	return statusExit(s)
}

func cmdExplain(c *cli.Context, stdout io.Writer) error {
	if n := c.Int("n"); n < 1 {
		return usageErr(c, "-n must be 1 or more (got %d)", n)
	}
	path := c.String("state-file")
	var cfg *config.Config
	if path == "" {
		var err error
		if cfg, err = loadConfig(c); err != nil {
			return err
		}
		path = cfg.StatePath()
	}
	if _, err := os.Stat(path); err != nil {
		return fail(1, "no state file at %s: %v", path, err)
	}
	st, err := store.OpenBolt(path, store.BoltOptions{ReadOnly: true})
	if err != nil {
		return corruptOr(err, path)
	}
	now := time.Now()
	if c.Bool("ndjson") {
		var b strings.Builder
		if err := explain.WriteNDJSON(&b, st, now); err != nil {
			return fail(1, "explain: %v", err)
		}
		_, err := fmt.Fprint(stdout, redact.String(b.String()))
		return err
	}
	at, err := asOf(c)
	if err != nil {
		return err
	}
	o := explain.Options{N: c.Int("n"), Now: now, Since: c.Duration("since"), Copy: c.String("state-file") != "", AsOf: at, Limits: explain.LimitsOf(cfg)}
	if cfg != nil {
		o.Limits.TickRunning = states.TickRunning(cfg.LockPath())
	}
	doc, err := explain.Build(st, o)
	if err != nil {
		return fail(1, "explain: %v", err)
	}
	if c.Bool("json") {
		return writeJSON(stdout, doc)
	}
	var b strings.Builder
	writeMovedAside(&b, doc.MovedAside)
	explain.WriteText(&b, doc)
	fmt.Fprint(stdout, redact.String(b.String()))
	return nil
}

// corruptOr is status's and explain's word on a state file they cannot open: a corrupt one is
// named as such, with what the next `run` does with it.
func corruptOr(err error, path string) error {
	var ce *store.CorruptError
	if errors.As(err, &ce) {
		return fail(1, "state file %s is corrupt: %s — the next `monky-deployd run` moves it aside to %s.corrupt-<UTC time> and starts afresh", path, ce.Problem, path)
	}
	return fail(1, "state file %s: %v", path, err)
}

// writeMovedAside says, above status and explain, that this state file replaced a corrupt one.
func writeMovedAside(b *strings.Builder, m *store.MovedAside) {
	if m == nil {
		return
	}
	fmt.Fprintf(b, "state file: started afresh at %s; the corrupt one (%s) is kept at %s\n\n", m.At.UTC().Format(time.RFC3339), m.Problem, m.Path)
}

func writeJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fail(1, "json: %v", err)
	}
	_, err = fmt.Fprintln(w, redact.String(string(b)))
	return err
}

func cmdResume(c *cli.Context, stdout, stderr io.Writer) error {
	cfg, log, st, err := setup(c, stderr)
	if err != nil {
		return err
	}
	a := &states.Agent{Cfg: cfg, Store: st, Log: log, Version: version.Version}
	var before store.Record
	if err := st.View(func(tx store.Tx) error { var err error; before, err = tx.Record(); return err }); err != nil {
		return fail(1, "resume: %v", err)
	}
	dry := c.Bool("dry-run")
	cleared, err := a.Resume(dry)
	if err != nil {
		return fail(1, "resume: %v", err)
	}
	verb := "cleared"
	if dry {
		verb = "would clear"
	}
	if len(cleared) == 0 {
		fmt.Fprintln(stdout, "nothing to clear: the machine is not parked")
	}
	for _, s := range cleared {
		fmt.Fprintf(stdout, "%s: %s\n", verb, redact.String(s))
	}
	for _, s := range resumeChecks(cfg, before) {
		fmt.Fprintln(stdout, "check: "+redact.String(s))
	}
	if dry || !c.Bool("now") {
		if !dry && len(cleared) > 0 {
			fmt.Fprintln(stdout, "the next tick checks again (or run `monky-deployd resume --now`)")
		}
		return nil
	}
	agent, err := newAgent(cfg, log, st)
	if err != nil {
		return err
	}
	return tickExit(agent.Tick(context.Background()))
}

func cmdBootstrap(c *cli.Context, stdout, stderr io.Writer) error {
	cfg, log, st, err := setup(c, stderr)
	if err != nil {
		return err
	}
	a, err := newAgent(cfg, log, st)
	if err != nil {
		return err
	}
	if err := a.BootstrapCommand(context.Background(), c.Bool("force")); err != nil {
		return &exitError{code: states.ExitCode(err), msg: err.Error()}
	}
	fmt.Fprintln(stdout, "token stored at "+cfg.TokenPath())
	return nil
}

// resumeChecks re-checks, where it is cheap, what the next tick needs: the config (read again
// by this command), the identity for the sdk and proxy transports, the bootstrap grant for a
// refused bearer. The disk cannot be measured without docker: the next tick measures it.
func resumeChecks(cfg *config.Config, rec store.Record) []string {
	out := []string{fmt.Sprintf("config %s read again: env %s, transport %s", cfg.Path, cfg.EnvID, cfg.Transport)}
	if rec.EnvID != "" && rec.EnvID != cfg.EnvID {
		out = append(out, fmt.Sprintf("the state file is for env %s, config.yaml says %s", rec.EnvID, cfg.EnvID))
	}
	if cfg.Transport == "sdk" || cfg.Transport == "proxy" {
		if err := transport.CheckIdentity(cfg.Identity); err != nil {
			out = append(out, "identity NOT usable: "+err.Error())
		} else {
			out = append(out, "identity "+cfg.Identity+" is readable and a ziti identity")
		}
	}
	if rec.Refusal != nil && rec.Refusal.Code == machine.CodeDisk {
		out = append(out, "disk: not measured here (that needs docker's data-root); the next tick measures it before anything else")
	}
	if rec.Block != nil && rec.Block.Code == machine.CodeUnauthenticated {
		if fi, err := os.Stat(cfg.BootstrapPath); err == nil && fi.Size() > 0 {
			out = append(out, "bootstrap grant present at "+cfg.BootstrapPath+": the next tick logs in with it")
		} else if err == nil {
			out = append(out, "the bootstrap grant at "+cfg.BootstrapPath+" is empty (a used grant is emptied): copy a fresh grant from the install kit there")
		} else {
			out = append(out, "no bootstrap grant at "+cfg.BootstrapPath+": unless the stored token works, the next tick blocks again — re-run the install kit")
		}
	}
	return out
}
