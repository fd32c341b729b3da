package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
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
	"github.com/tikali/monky-deployd/internal/logging"
	"github.com/tikali/monky-deployd/internal/phase"
	"github.com/tikali/monky-deployd/internal/redact"
	"github.com/tikali/monky-deployd/internal/sanitize"
	"github.com/tikali/monky-deployd/internal/version"
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

// run is main without os.Exit: it returns the exit code. Everything it writes to stdout, and
// its closing line on stderr, passes redact.Default on the way out, as every log line does
// (internal/logging): the commands write their words and mask nothing themselves.
func run(args []string, stdout, stderr io.Writer) int {
	sink := redact.Default.Writer(stdout)
	defer func() { _ = sink.(*redact.LineWriter).Flush() }()
	stdout = sink
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
	stderr = redact.Default.Writer(stderr) // each closing line is written whole
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.msg != "" {
			fmt.Fprintln(stderr, prefix+"monky-deployd: "+sanitize.Text(ee.msg)) // a file name may come from a copy
		}
		return ee.code
	}
	// what else the cli library answers (help for no such topic) is a usage error too
	fmt.Fprintln(stderr, prefix+"monky-deployd: "+usageLine("", flagErrorWords(strings.TrimSpace(err.Error()))).Error())
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
			runCommand(stderr),
			statusCommand(stdout),
			explainCommand(stdout),
			resumeCommand(stdout, stderr),
			holdCommand(stdout, stderr),
			bootstrapCommand(stdout, stderr),
			enrollCommand(stdout, stderr),
			diagramCommand(stdout),
			checkCommand(stdout),
			versionCommand(stdout),
			completionCommand(stdout),
			purgeCommand(stdout),
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
		return nil, &exitError{code: 1, msg: err.Error(), cause: err}
	}
	return cfg, nil
}

// openStore opens the state file for a command that changes state: it waits store.TickWait for
// readers (status, explain, the bbolt CLI) to let go, longer than they wait for it. Its error
// carries the cause, so a state file held past the wait exits 75.
func openStore(cfg *config.Config, log zerolog.Logger) (*store.Bolt, error) {
	if err := os.MkdirAll(cfg.StateDir, 0o700); err != nil {
		return nil, &exitError{code: 1, msg: fmt.Sprintf("state dir: %v", err), cause: fmt.Errorf("state dir: %w", err)}
	}
	// nothing is read from or written through a state_dir or state.db the agent cannot trust
	if err := states.CheckTrust(cfg); err != nil {
		return nil, &exitError{code: 1, msg: err.Error(), cause: err}
	}
	st, err := store.OpenBolt(cfg.StatePath(), store.BoltOptions{Timeout: store.TickWait, Logf: func(f string, a ...any) { log.Warn().Msgf(f, a...) }})
	if err != nil {
		err = fmt.Errorf("state file: %w", err)
		return nil, &exitError{code: states.ExitCode(err), msg: err.Error(), cause: err}
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
	d, err := transport.New(transport.FromConfig(cfg))
	if err != nil {
		return nil, &exitError{code: 1, msg: err.Error(), cause: effects.Classify("transport", "", cfg.Transport, err)}
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
