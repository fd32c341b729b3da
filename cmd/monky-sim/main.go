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
  desire    set the desired release: --env E --release NAME
  retire    retire an env: --env E [--purge]
  reveal    reveal a kit into a directory: --env E --kit DIR
  secret    write a KV version: --env E --name N --key K --value V (- reads stdin)
  reports   print the env's reports as JSON lines: --env E
  counts    print the env's counters: --env E
  releases  list the env's releases: --env E
  fleet     one line per env from its last report's why (env, verdict, code, since, next),
            grouped by code; only the envs with a code unless --all; --json for scripts
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

func serve(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	releases := fs.String("releases", "", "directory whose subdirectories are releases (and secrets.json)")
	envID := fs.String("env", "", "env_id the releases belong to")
	kit := fs.String("kit", "", "write an install kit (config.yaml, bootstrap.jwt) into this directory")
	addrFile := fs.String("addr-file", "", "write the three URLs as JSON to this file")
	desire := fs.String("desire", "", "release to make desired at start")
	tenancyAddr := fs.String("tenancy", "127.0.0.1:0", "tenancy listen address")
	baoAddr := fs.String("bao", "127.0.0.1:0", "OpenBao listen address")
	adminAddr := fs.String("admin", "127.0.0.1:0", "admin API listen address")
	interval := fs.Int("interval", 60, "checkin_interval_s the check-ins answer")
	gz := fs.Bool("gzip", false, "serve bundles gzip-compressed")
	kf := addKitFlags(fs, "kit")
	kitInterval := fs.Int("kit-interval", 0, "kit: interval_s")
	quiet := fs.Bool("quiet", false, "do not log requests")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *envID == "" {
		return fmt.Errorf("%w: serve needs --env", errUsage)
	}
	logger := log.New(stderr, "", log.LstdFlags)
	logf := logger.Printf
	if *quiet {
		logf = func(string, ...any) {}
	}
	s, err := sim.New(sim.Options{Logf: logf})
	if err != nil {
		return err
	}
	s.AddEnv(*envID)
	s.SetCheckinInterval(*interval)
	s.SetBundleGzip(*gz)
	if *releases != "" {
		if _, err := s.LoadReleasesDir(*envID, *releases); err != nil {
			return err
		}
	}
	if *desire != "" {
		if _, err := s.SetDesiredRelease(*envID, *desire); err != nil {
			return err
		}
	}

	servers, err := s.Listen(*tenancyAddr, *baoAddr, *adminAddr)
	if err != nil {
		return err
	}
	defer servers.Close()
	addrs := servers.Addrs

	if *kit != "" {
		if err := s.WriteKit(*kit, sim.Kit{EnvID: *envID, TenancyURL: addrs.Tenancy, BaoURL: addrs.Bao,
			StateDir: *kf.stateDir, DeployDir: *kf.deployDir, DockerBin: *kf.dockerBin, IntervalS: *kitInterval}); err != nil {
			return err
		}
	}
	_, _ = fmt.Fprintf(stdout, "tenancy %s\nbao %s\nadmin %s\n", addrs.Tenancy, addrs.Bao, addrs.Admin)
	// The addr file comes last: whoever waits for it finds everything else done.
	if *addrFile != "" {
		if err := addrs.WriteFile(*addrFile); err != nil {
			return fmt.Errorf("addr file: %w", err)
		}
	}
	if err := servers.Serve(ctx); err != nil {
		return err
	}
	logf("monky-sim: stopped")
	return nil
}

func client(ctx context.Context, cmd string, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	admin := fs.String("admin", "", "admin API URL")
	addrFile := fs.String("addr-file", "", "the file serve wrote with --addr-file")
	envID := fs.String("env", "", "env_id")
	release := fs.String("release", "", "desire: release name")
	purge := fs.Bool("purge", false, "retire: purge volumes")
	kit := fs.String("kit", "", "reveal: kit directory")
	kf := addKitFlags(fs, "reveal")
	name := fs.String("name", "", "secret: name under <env>/see/")
	key := fs.String("key", "value", "secret: key")
	value := fs.String("value", "", "secret: value (- reads one line from stdin)")
	all := fs.Bool("all", false, "fleet: every env, converged ones too")
	asJSON := fs.Bool("json", false, "fleet: print the rows as one JSON array")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *envID == "" && cmd != "fleet" {
		return fmt.Errorf("%w: %s needs --env", errUsage, cmd)
	}
	base := *admin
	if base == "" && *addrFile != "" {
		raw, err := os.ReadFile(*addrFile)
		if err != nil {
			return fmt.Errorf("addr file: %w", err)
		}
		var a Addrs
		if err := json.Unmarshal(raw, &a); err != nil {
			return fmt.Errorf("addr file: %w", err)
		}
		base = a.Admin
	}
	if base == "" {
		return fmt.Errorf("%w: %s needs --admin URL or --addr-file F", errUsage, cmd)
	}
	base = strings.TrimRight(base, "/")
	q := "?env=" + url.QueryEscape(*envID)

	switch cmd {
	case "desire":
		if *release == "" {
			return fmt.Errorf("%w: desire needs --release", errUsage)
		}
		var out struct{ Sha string }
		if err := call(ctx, "POST", base+"/admin/desire", sim.DesireRequest{Env: *envID, Release: *release}, &out); err != nil {
			return err
		}
		_, _ = fmt.Fprintf(stdout, "%s desired %s %s\n", *envID, *release, out.Sha)
	case "retire":
		if err := call(ctx, "POST", base+"/admin/retire", sim.RetireRequest{Env: *envID, Purge: *purge}, nil); err != nil {
			return err
		}
		_, _ = fmt.Fprintf(stdout, "%s retired (purge %t)\n", *envID, *purge)
	case "reveal":
		if *kit == "" {
			return fmt.Errorf("%w: reveal needs --kit", errUsage)
		}
		dir, err := filepath.Abs(*kit)
		if err != nil {
			return fmt.Errorf("kit: %w", err)
		}
		var out struct{ Config, Bootstrap string }
		req := sim.RevealRequest{Env: *envID, Kit: dir, StateDir: *kf.stateDir, DeployDir: *kf.deployDir, DockerBin: *kf.dockerBin}
		if err := call(ctx, "POST", base+"/admin/reveal", req, &out); err != nil {
			return err
		}
		_, _ = fmt.Fprintf(stdout, "kit for %s written: %s %s\n", *envID, out.Config, out.Bootstrap)
	case "secret":
		if *name == "" || *value == "" {
			return fmt.Errorf("%w: secret needs --name and --value", errUsage)
		}
		v := *value
		if v == "-" {
			line, err := bufio.NewReader(stdin).ReadString('\n')
			if err != nil && !errors.Is(err, io.EOF) {
				return fmt.Errorf("read value: %w", err)
			}
			v = strings.TrimRight(line, "\r\n")
		}
		var out struct{ Version int }
		req := sim.SecretRequest{Env: *envID, Name: *name, Data: map[string]string{*key: v}}
		if err := call(ctx, "POST", base+"/admin/secret", req, &out); err != nil {
			return err
		}
		_, _ = fmt.Fprintf(stdout, "%d\n", out.Version)
	case "reports":
		var out []json.RawMessage
		if err := call(ctx, "GET", base+"/admin/reports"+q, nil, &out); err != nil {
			return err
		}
		for _, r := range out {
			var b bytes.Buffer
			if err := json.Compact(&b, r); err != nil {
				return fmt.Errorf("reports: %w", err)
			}
			_, _ = fmt.Fprintln(stdout, b.String())
		}
	case "fleet":
		u := base + "/admin/fleet"
		if *all {
			u += "?all=1"
		}
		var rows []sim.FleetRow
		if err := call(ctx, "GET", u, nil, &rows); err != nil {
			return err
		}
		if *asJSON {
			b, err := json.Marshal(rows)
			if err != nil {
				return fmt.Errorf("fleet: %w", err)
			}
			_, _ = fmt.Fprintln(stdout, string(b))
			return nil
		}
		sim.WriteFleet(stdout, rows)
	case "counts", "releases":
		var out json.RawMessage
		if err := call(ctx, "GET", base+"/admin/"+cmd+q, nil, &out); err != nil {
			return err
		}
		var b bytes.Buffer
		if err := json.Compact(&b, out); err != nil {
			return fmt.Errorf("%s: %w", cmd, err)
		}
		_, _ = fmt.Fprintln(stdout, b.String())
	}
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
