// Command monky-sim runs the tenancy + OpenBao simulator (package sim) as a process, for the
// demo and for tenancy's developers, and drives a running one through its admin API.
//
//	monky-sim serve --releases DIR --env ENV [--kit DIR] [--addr-file F] [--desire NAME]
//	          [--tenancy 127.0.0.1:0] [--bao 127.0.0.1:0] [--admin 127.0.0.1:0]
//	monky-sim desire  --env E --release NAME      (--admin URL | --addr-file F)
//	monky-sim retire  --env E [--purge]
//	monky-sim reveal  --env E --kit DIR
//	monky-sim secret  --env E --name N --key K --value V   (prints the new version only)
//	monky-sim reports --env E                     (JSON lines)
//	monky-sim counts  --env E
//	monky-sim releases --env E
//	monky-sim fleet [--all] [--json]              (each env's verdict from its last report)
//
// It listens on loopback by default and never dials anything but its own admin API. It never
// prints a token, a grant or a secret value.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/tikali/monky-deployd/test/sim"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

const usage = `usage: monky-sim <command> [flags]
commands:
  serve     run the simulator: --releases DIR --env ENV [--kit DIR] [--addr-file F] [--desire NAME]
            (each directory in DIR is a release; a bundle.json in it is completed, its agent flags
            kept: {"agent": {"revert_on_failure": true}} publishes a release that consents to a revert)
  desire    set the desired release: --env E --release NAME
  retire    retire an env: --env E [--purge]
  reveal    reveal a kit into a directory: --env E --kit DIR
  secret    write a KV version: --env E --name N --key K --value V (- reads stdin)
  reports   print the env's reports as JSON lines: --env E
  counts    print the env's counters: --env E
  releases  list the env's releases: --env E
  fleet     one line per env from its last report's why (env, verdict, code, since, next),
            grouped by code; a box quiet past serve's --stale-after is silent (its last words
            shown with their age), one that has not applied its desired sha is not converged;
            only the envs that need a look unless --all; --json for scripts
client commands take --admin URL or --addr-file F (written by serve).
`

// errUsage marks an error the user fixes by reading the usage.
var errUsage = errors.New("usage")

// run is the whole command; main only wires the signals and the exit code.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		_, _ = fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch cmd, rest := args[0], args[1:]; cmd {
	case "serve":
		err = serve(ctx, rest, stdout, stderr)
	case "desire", "retire", "reveal", "secret", "reports", "counts", "releases", "fleet":
		err = client(ctx, cmd, rest, stdin, stdout, stderr)
	case "-h", "--help", "help":
		_, _ = fmt.Fprint(stdout, usage)
		return 0
	default:
		err = fmt.Errorf("%w: unknown command %q", errUsage, cmd)
	}
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		_, _ = fmt.Fprintf(stderr, "monky-sim: %v\n", err)
		return 2
	default:
		_, _ = fmt.Fprintf(stderr, "monky-sim: %v\n", err)
		return 1
	}
}

// Addrs is the --addr-file document.
type Addrs = sim.Addrs

// serveFlags are serve's flags.
type serveFlags struct {
	releases, envID, kit, addrFile, desire *string
	tenancyAddr, baoAddr, adminAddr        *string
	interval, kitInterval                  *int
	gzip, quiet                            *bool
	staleAfter, stuckAfter                 *time.Duration
	kf                                     kitFlags
}

func parseServeFlags(args []string, stderr io.Writer) (serveFlags, error) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	f := serveFlags{
		releases:    fs.String("releases", "", "directory whose subdirectories are releases (and secrets.json)"),
		envID:       fs.String("env", "", "env_id the releases belong to"),
		kit:         fs.String("kit", "", "write an install kit (config.yaml, bootstrap.jwt) into this directory"),
		addrFile:    fs.String("addr-file", "", "write the three URLs as JSON to this file"),
		desire:      fs.String("desire", "", "release to make desired at start"),
		tenancyAddr: fs.String("tenancy", "127.0.0.1:0", "tenancy listen address"),
		baoAddr:     fs.String("bao", "127.0.0.1:0", "OpenBao listen address"),
		adminAddr:   fs.String("admin", "127.0.0.1:0", "admin API listen address"),
		interval:    fs.Int("interval", 60, "checkin_interval_s the check-ins answer"),
		gzip:        fs.Bool("gzip", false, "serve bundles gzip-compressed"),
		staleAfter:  fs.Duration("stale-after", 300*time.Second, "fleet: a box silent this long reads silent (the agents' stale_after_s)"),
		stuckAfter:  fs.Duration("stuck-after", 1800*time.Second, "fleet: a box that has not applied its desired sha this long needs a person (stuck_after_s)"),
	}
	f.kf = addKitFlags(fs, "kit")
	f.kitInterval = fs.Int("kit-interval", 0, "kit: interval_s")
	f.quiet = fs.Bool("quiet", false, "do not log requests")
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	if *f.envID == "" {
		return f, fmt.Errorf("%w: serve needs --env", errUsage)
	}
	return f, nil
}

func serve(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f, err := parseServeFlags(args, stderr)
	if err != nil {
		return err
	}
	logf := log.New(stderr, "", log.LstdFlags).Printf
	if *f.quiet {
		logf = func(string, ...any) {}
	}
	s, err := newSim(f, logf)
	if err != nil {
		return err
	}
	servers, err := s.Listen(*f.tenancyAddr, *f.baoAddr, *f.adminAddr)
	if err != nil {
		return err
	}
	defer servers.Close()
	addrs := servers.Addrs

	if *f.kit != "" {
		if err := s.WriteKit(*f.kit, sim.Kit{EnvID: *f.envID, TenancyURL: addrs.Tenancy, BaoURL: addrs.Bao,
			StateDir: *f.kf.stateDir, DeployDir: *f.kf.deployDir, DockerBin: *f.kf.dockerBin, IntervalS: *f.kitInterval}); err != nil {
			return err
		}
	}
	_, _ = fmt.Fprintf(stdout, "tenancy %s\nbao %s\nadmin %s\n", addrs.Tenancy, addrs.Bao, addrs.Admin)
	// The addr file comes last: whoever waits for it finds everything else done.
	if *f.addrFile != "" {
		if err := addrs.WriteFile(*f.addrFile); err != nil {
			return fmt.Errorf("addr file: %w", err)
		}
	}
	if err := servers.Serve(ctx); err != nil {
		return err
	}
	logf("monky-sim: stopped")
	return nil
}

// newSim is the simulator serve runs: the env, its releases and the one desired at start.
func newSim(f serveFlags, logf func(string, ...any)) (*sim.Sim, error) {
	s, err := sim.New(sim.Options{Logf: logf, StaleAfter: *f.staleAfter, StuckAfter: *f.stuckAfter})
	if err != nil {
		return nil, err
	}
	s.AddEnv(*f.envID)
	s.SetCheckinInterval(*f.interval)
	s.SetBundleGzip(*f.gzip)
	if *f.releases != "" {
		if _, err := s.LoadReleasesDir(*f.envID, *f.releases); err != nil {
			return nil, err
		}
	}
	if *f.desire != "" {
		if _, err := s.SetDesiredRelease(*f.envID, *f.desire); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// clientFlags are every client command's flags; each command reads its own.
type clientFlags struct {
	admin, addrFile, envID, release, kit, name, key, value *string
	purge, all, asJSON                                     *bool
	kf                                                     kitFlags
}

func parseClientFlags(cmd string, args []string, stderr io.Writer) (clientFlags, error) {
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	f := clientFlags{
		admin:    fs.String("admin", "", "admin API URL"),
		addrFile: fs.String("addr-file", "", "the file serve wrote with --addr-file"),
		envID:    fs.String("env", "", "env_id"),
		release:  fs.String("release", "", "desire: release name"),
		purge:    fs.Bool("purge", false, "retire: purge volumes"),
		kit:      fs.String("kit", "", "reveal: kit directory"),
	}
	f.kf = addKitFlags(fs, "reveal")
	f.name = fs.String("name", "", "secret: name under <env>/see/")
	f.key = fs.String("key", "value", "secret: key")
	f.value = fs.String("value", "", "secret: value (- reads one line from stdin)")
	f.all = fs.Bool("all", false, "fleet: every env, converged ones too")
	f.asJSON = fs.Bool("json", false, "fleet: print the rows as one JSON array")
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	if *f.envID == "" && cmd != "fleet" {
		return f, fmt.Errorf("%w: %s needs --env", errUsage, cmd)
	}
	return f, nil
}

// adminBase is the admin API's URL: --admin, else the one in serve's --addr-file.
func adminBase(cmd string, f clientFlags) (string, error) {
	base := *f.admin
	if base == "" && *f.addrFile != "" {
		raw, err := os.ReadFile(*f.addrFile)
		if err != nil {
			return "", fmt.Errorf("addr file: %w", err)
		}
		var a Addrs
		if err := json.Unmarshal(raw, &a); err != nil {
			return "", fmt.Errorf("addr file: %w", err)
		}
		base = a.Admin
	}
	if base == "" {
		return "", fmt.Errorf("%w: %s needs --admin URL or --addr-file F", errUsage, cmd)
	}
	return strings.TrimRight(base, "/"), nil
}

func client(ctx context.Context, cmd string, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	f, err := parseClientFlags(cmd, args, stderr)
	if err != nil {
		return err
	}
	base, err := adminBase(cmd, f)
	if err != nil {
		return err
	}
	a := adminCall{ctx: ctx, base: base, f: f, stdin: stdin, stdout: stdout}
	switch cmd {
	case "desire":
		return a.desire()
	case "retire":
		return a.retire()
	case "reveal":
		return a.reveal()
	case "secret":
		return a.secret()
	case "reports":
		return a.reports()
	case "fleet":
		return a.fleet()
	}
	return a.compact(cmd) // counts, releases
}

// adminCall is one client command against the admin API at base.
type adminCall struct {
	ctx    context.Context
	base   string
	f      clientFlags
	stdin  io.Reader
	stdout io.Writer
}

// query is the env's query string.
func (a adminCall) query() string { return "?env=" + url.QueryEscape(*a.f.envID) }

func (a adminCall) desire() error {
	if *a.f.release == "" {
		return fmt.Errorf("%w: desire needs --release", errUsage)
	}
	var out struct{ Sha string }
	if err := call(a.ctx, "POST", a.base+"/admin/desire", sim.DesireRequest{Env: *a.f.envID, Release: *a.f.release}, &out); err != nil {
		return err
	}
	_, _ = fmt.Fprintf(a.stdout, "%s desired %s %s\n", *a.f.envID, *a.f.release, out.Sha)
	return nil
}

func (a adminCall) retire() error {
	if err := call(a.ctx, "POST", a.base+"/admin/retire", sim.RetireRequest{Env: *a.f.envID, Purge: *a.f.purge}, nil); err != nil {
		return err
	}
	_, _ = fmt.Fprintf(a.stdout, "%s retired (purge %t)\n", *a.f.envID, *a.f.purge)
	return nil
}

func (a adminCall) reveal() error {
	if *a.f.kit == "" {
		return fmt.Errorf("%w: reveal needs --kit", errUsage)
	}
	dir, err := filepath.Abs(*a.f.kit)
	if err != nil {
		return fmt.Errorf("kit: %w", err)
	}
	var out struct{ Config, Bootstrap string }
	kf := a.f.kf
	req := sim.RevealRequest{Env: *a.f.envID, Kit: dir, StateDir: *kf.stateDir, DeployDir: *kf.deployDir, DockerBin: *kf.dockerBin}
	if err := call(a.ctx, "POST", a.base+"/admin/reveal", req, &out); err != nil {
		return err
	}
	_, _ = fmt.Fprintf(a.stdout, "kit for %s written: %s %s\n", *a.f.envID, out.Config, out.Bootstrap)
	return nil
}

func (a adminCall) secret() error {
	if *a.f.name == "" || *a.f.value == "" {
		return fmt.Errorf("%w: secret needs --name and --value", errUsage)
	}
	v := *a.f.value
	if v == "-" {
		line, err := bufio.NewReader(a.stdin).ReadString('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("read value: %w", err)
		}
		v = strings.TrimRight(line, "\r\n")
	}
	var out struct{ Version int }
	req := sim.SecretRequest{Env: *a.f.envID, Name: *a.f.name, Data: map[string]string{*a.f.key: v}}
	if err := call(a.ctx, "POST", a.base+"/admin/secret", req, &out); err != nil {
		return err
	}
	_, _ = fmt.Fprintf(a.stdout, "%d\n", out.Version)
	return nil
}

func (a adminCall) reports() error {
	var out []json.RawMessage
	if err := call(a.ctx, "GET", a.base+"/admin/reports"+a.query(), nil, &out); err != nil {
		return err
	}
	for _, r := range out {
		var b bytes.Buffer
		if err := json.Compact(&b, r); err != nil {
			return fmt.Errorf("reports: %w", err)
		}
		_, _ = fmt.Fprintln(a.stdout, b.String())
	}
	return nil
}

func (a adminCall) fleet() error {
	u := a.base + "/admin/fleet"
	if *a.f.all {
		u += "?all=1"
	}
	var rows []sim.FleetRow
	if err := call(a.ctx, "GET", u, nil, &rows); err != nil {
		return err
	}
	if *a.f.asJSON {
		b, err := json.Marshal(rows)
		if err != nil {
			return fmt.Errorf("fleet: %w", err)
		}
		_, _ = fmt.Fprintln(a.stdout, string(b))
		return nil
	}
	sim.WriteFleet(a.stdout, rows)
	return nil
}

// compact prints the env's counts or releases as one line of JSON.
func (a adminCall) compact(cmd string) error {
	var out json.RawMessage
	if err := call(a.ctx, "GET", a.base+"/admin/"+cmd+a.query(), nil, &out); err != nil {
		return err
	}
	var b bytes.Buffer
	if err := json.Compact(&b, out); err != nil {
		return fmt.Errorf("%s: %w", cmd, err)
	}
	_, _ = fmt.Fprintln(a.stdout, b.String())
	return nil
}

// kitFlags are the kit's fields that serve --kit and reveal both take.
type kitFlags struct{ stateDir, deployDir, dockerBin *string }

// addKitFlags defines them on fs; use names the command in their help ("kit", "reveal").
func addKitFlags(fs *flag.FlagSet, use string) kitFlags {
	return kitFlags{
		stateDir:  fs.String("state-dir", "", use+": state_dir (default <kit>/state)"),
		deployDir: fs.String("deploy-dir", "", use+": deploy_dir"),
		dockerBin: fs.String("docker-bin", "", use+": docker_bin"),
	}
}

// call sends body (when not nil) as JSON and decodes the answer into out (when not nil).
func call(ctx context.Context, method, u string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("encode request: %w", err)
		}
		rd = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return fmt.Errorf("admin request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("admin api: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("admin api: %w", err)
	}
	if resp.StatusCode/100 != 2 {
		var e struct{ Error string }
		if json.Unmarshal(raw, &e) == nil && e.Error != "" {
			return fmt.Errorf("admin api: %s", e.Error)
		}
		return fmt.Errorf("admin api: %s", resp.Status)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return fmt.Errorf("admin api answer: %w", err)
		}
	}
	return nil
}
