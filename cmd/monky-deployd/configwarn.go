package main

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/tikali/monky-deployd/internal/config"
)

// What the shipped units decide for every box (packaging/systemd): the timer ticks every
// timerEvery plus up to timerJitter; the service sees only writablePaths (ProtectSystem=strict)
// and a /tmp of its own (PrivateTmp=yes). packaging/units_test.go compares them with the units.
const (
	timerEvery  = 60 // OnUnitActiveSec=, seconds
	timerJitter = 20 // RandomizedDelaySec=, seconds
)

var writablePaths = []string{"/var/lib/monky-deployd", "/etc/monky-deployd", "/var/lib/prometheus/node-exporter"}

// serviceUnit is the unit whose sandbox decides what a tick may write.
const serviceUnit = "monky-deployd.service"

// systemctlShow runs `systemctl show ARGS…` and returns its stdout: the seam a test replaces
// to feed the check a unit's properties.
var systemctlShow = func(args ...string) ([]byte, error) {
	bin, err := exec.LookPath("systemctl")
	if err != nil {
		return nil, errors.New("no systemctl on PATH")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, append([]string{"show"}, args...)...).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && len(ee.Stderr) > 0 {
			return nil, fmt.Errorf("%w: %s", err, strings.TrimSpace(string(ee.Stderr)))
		}
		return nil, err
	}
	return out, nil
}

// unitWrites is what the unit lets a tick write: ReadWritePaths= as systemd has it for
// monky-deployd.service, the shipped unit's and every drop-in's (`systemctl show`), from=true;
// when that cannot be read (no systemctl, systemd not running, the unit not installed) the
// shipped unit's writablePaths, from=false, and why.
type unitWrites struct {
	paths  []string
	real   bool
	reason string
}

func readUnitWrites() unitWrites {
	out, err := systemctlShow("-p", "LoadState", "-p", "ReadWritePaths", serviceUnit)
	if err != nil {
		return unitWrites{paths: writablePaths, reason: "systemctl show " + serviceUnit + ": " + err.Error()}
	}
	load, rw := "", ""
	for _, line := range strings.Split(string(out), "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(line), "=")
		switch k {
		case "LoadState":
			load = v
		case "ReadWritePaths":
			rw = v
		}
	}
	if load != "loaded" {
		if load == "" {
			load = "not said"
		}
		return unitWrites{paths: writablePaths, reason: serviceUnit + " is not known to systemd here (LoadState=" + load + ")"}
	}
	var paths []string
	for _, p := range strings.Fields(rw) {
		// "-": a path that may be missing; "+": relative to the unit's RootDirectory=
		if p = strings.TrimLeft(p, "-+"); strings.HasPrefix(p, "/") {
			paths = append(paths, p)
		}
	}
	return unitWrites{paths: paths, real: true}
}

// writable reports whether the unit lets the agent write path.
func (u unitWrites) writable(path string) bool {
	for _, w := range u.paths {
		if under(path, w) {
			return true
		}
	}
	return false
}

// notAmong is the words of a warning for a path the unit does not let the agent write.
func (u unitWrites) notAmong() string {
	if u.real {
		return fmt.Sprintf("is not among the unit's ReadWritePaths= (%s, as `systemctl show %s` has them, drop-ins included)",
			strings.Join(u.paths, " "), serviceUnit)
	}
	return fmt.Sprintf("is not among the unit's ReadWritePaths= (%s, the shipped unit's: the unit itself could not be read, %s)",
		strings.Join(u.paths, " "), u.reason)
}

// configWarning is a setting that loads but makes the box always red or silent under the
// shipped units: the key, its line (0 when it is left out) and why.
type configWarning struct {
	key  string
	line int
	msg  string
}

// configWarnings are the settings of cfg (read from path) that make a box always red or
// silent: `check config` prints them, `check config --strict` (the role, postinst) fails on them.
func configWarnings(cfg *config.Config, path string) []configWarning {
	var out []configWarning
	unit := readUnitWrites()
	warn := func(key, format string, args ...any) {
		top, _, _ := strings.Cut(key, ".")
		out = append(out, configWarning{key: key, line: keyLine(path, top), msg: fmt.Sprintf(format, args...)})
	}
	// a tick is due every period at worst: the timer's, or interval_s in loop mode
	period := max(timerEvery, cfg.IntervalS) + timerJitter
	if cfg.StaleAfterS < 2*period {
		warn("stale_after_s", "stale_after_s %d is below two ticks (%d s: every %d s plus up to %d s of the timer's delay): between two ticks the box reads TICKS_STOPPED, always red",
			cfg.StaleAfterS, 2*period, max(timerEvery, cfg.IntervalS), timerJitter)
	}
	if cfg.StuckAfterS < 2*period {
		warn("stuck_after_s", "stuck_after_s %d is below two ticks (%d s): one temporary fault (exit 75) already needs a person, the box reads red on every blip",
			cfg.StuckAfterS, 2*period)
	}
	for _, d := range []struct{ key, dir string }{{"state_dir", cfg.StateDir}, {"deploy_dir", cfg.DeployDir}} {
		if d.key == "deploy_dir" && under(d.dir, cfg.StateDir) {
			continue // state_dir's line says it
		}
		switch tmp := tmpOf(d.dir); {
		case tmp != "":
			warn(d.key, "%s %s is under "+tmp+": the unit's PrivateTmp=yes gives the agent a /tmp of its own, which no shell (status, explain, a person) and no container bind mount sees", d.key, d.dir)
		case !unit.writable(d.dir) && unit.real:
			warn(d.key, "%s %s %s: every tick fails writing it; add it with a drop-in (sudo systemctl edit %s: [Service] ReadWritePaths=%s)",
				d.key, d.dir, unit.notAmong(), serviceUnit, d.dir)
		case !unit.writable(d.dir):
			warn(d.key, "%s %s %s: every tick fails writing it, unless a drop-in adds it", d.key, d.dir, unit.notAmong())
		}
	}
	switch {
	case cfg.MetricsPath == "":
		warn("metrics_path", "metrics_path is not set: no metrics textfile, so no alert ever sees this box, red or silent (set metrics_path: /var/lib/prometheus/node-exporter/monky_deployd.prom)")
	case !unit.writable(filepath.Dir(cfg.MetricsPath)):
		warn("metrics_path", "metrics_path %s %s: the write is refused and no alert sees this box", cfg.MetricsPath, unit.notAmong())
	}
	if cfg.TickTimeoutS > 0 && cfg.HealthyTimeoutS >= cfg.TickTimeoutS {
		warn("healthy_timeout_s", "healthy_timeout_s %d is not below tick_timeout_s %d: an apply whose services take their time ends at the tick's deadline (exit 75) before they can turn healthy",
			cfg.HealthyTimeoutS, cfg.TickTimeoutS)
	}
	return out
}

// tmpOf is the private temporary directory (PrivateTmp=) path is under, "" when none.
func tmpOf(path string) string {
	for _, t := range []string{"/tmp", "/var/tmp"} {
		if under(path, t) {
			return t
		}
	}
	return ""
}

// under reports whether path is dir or below it.
func under(path, dir string) bool {
	rel, err := filepath.Rel(dir, filepath.Clean(path))
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}
