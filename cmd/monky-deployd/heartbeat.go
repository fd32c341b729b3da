//go:build heartbeat

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/internal/config"
	"github.com/tikali/monky-deployd/states"
)

// The heartbeat build (-tags heartbeat): the package's /usr/bin/monky-deployd, so what the
// systemd timer runs every minute and what an operator types. It links neither OpenBao's client
// nor compose's loader; it runs a converged box's tick, status, explain, version and completion
// itself and execs the complete agent for everything else (states/handover.go,
// docs/PERFORMANCE.md).
const heartbeatBuild = true

// completeAgent is the complete agent's path, set at link time by the package
// (-X main.completeAgent=../libexec/monky-deployd/monky-deployd); a relative path is taken from
// this binary's directory, so a package unpacked under another root finds its own. Empty:
// monky-deployd beside this binary (make build's bin/).
var completeAgent string

// errNoBao: any tick that would ask OpenBao is handed over before it asks.
var errNoBao = errors.New("the heartbeat build has no OpenBao client")

// noBao is the heartbeat build's OpenBao: never asked.
type noBao struct{}

func (noBao) Login(context.Context, string, string, string) (effects.Token, error) {
	return effects.Token{}, errNoBao
}
func (noBao) LookupSelf(context.Context, string) (effects.TokenInfo, error) {
	return effects.TokenInfo{}, errNoBao
}
func (noBao) RenewSelf(context.Context, string, time.Duration) (time.Duration, error) {
	return 0, errNoBao
}
func (noBao) RevokeSelf(context.Context, string) error { return errNoBao }
func (noBao) ReadKV(context.Context, string, string, string, int) (string, error) {
	return "", errNoBao
}

func newBao(*config.Config, *http.Client) (effects.Bao, error) { return noBao{}, nil }

// handOverTo makes a's ticks hand what is not a heartbeat to the complete agent.
func handOverTo(a *states.Agent) { a.HandOver = execComplete }

// ownCommands are those the heartbeat build runs itself: they read, and need neither OpenBao
// nor compose's loader.
var ownCommands = map[string]bool{"status": true, "explain": true, "version": true, "completion": true}

// handOverOthers makes every command but those and `run --once` (without --prune) the complete
// agent's.
func handOverOthers(app *cli.App) {
	for _, c := range app.Commands {
		if ownCommands[c.Name] {
			continue
		}
		if c.Name == "run" {
			run := c.Action
			c.Action = func(c *cli.Context) error {
				if err := handedBack(); err != nil {
					return err
				}
				if c.Bool("once") && !c.Bool("prune") {
					return run(c)
				}
				return passOn(c)
			}
			continue
		}
		c.Action = passOn
	}
}

func passOn(*cli.Context) error {
	if err := handedBack(); err != nil {
		return err
	}
	return fail(1, "%v", execComplete(states.Handover{}))
}

// handedBack refuses to run when a heartbeat build handed this process a tick: the path it
// took for the complete agent holds a heartbeat build too.
func handedBack() error {
	if _, ok := os.LookupEnv(envHandover); !ok {
		return nil
	}
	self, _ := os.Executable()
	return fail(1, "%s is the heartbeat build, reached as the complete agent: install the complete monky-deployd there", self)
}

// execComplete execs the complete agent with this process's arguments. With a check-in or a
// held lock it passes them on: the handover as JSON in a memfd and the lock's open file, both
// named in MONKY_DEPLOYD_HANDOVER. It returns only when the exec failed.
func execComplete(h states.Handover) error {
	path, err := completePath()
	if err != nil {
		return err
	}
	env := withoutHandover(os.Environ())
	mark := "-"
	if h.Lock != nil {
		data, err := json.Marshal(h)
		if err != nil {
			return err
		}
		mfd, err := unix.MemfdCreate("monky-deployd-handover", 0) // no MFD_CLOEXEC: it crosses the exec
		if err != nil {
			return fmt.Errorf("handover: %w", err)
		}
		if err := writeAll(mfd, data); err != nil {
			return fmt.Errorf("handover: %w", err)
		}
		lfd := int(h.Lock.Fd())
		if _, err := unix.FcntlInt(uintptr(lfd), unix.F_SETFD, 0); err != nil {
			return fmt.Errorf("handover: keep the tick lock across exec: %w", err)
		}
		mark = fmt.Sprintf("%d,%d", mfd, lfd)
	}
	env = append(env, envHandover+"="+mark)
	err = syscall.Exec(path, append([]string{path}, os.Args[1:]...), env)
	return fmt.Errorf("exec the complete agent %s: %w", path, err)
}

func withoutHandover(env []string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, envHandover+"=") {
			out = append(out, kv)
		}
	}
	return out
}

func writeAll(fd int, b []byte) error {
	for len(b) > 0 {
		n, err := unix.Write(fd, b)
		if err != nil {
			return err
		}
		b = b[n:]
	}
	_, err := unix.Seek(fd, 0, 0)
	return err
}

// completePath is the complete agent's path: completeAgent, else monky-deployd beside this
// binary. It is never this binary, nor reached from another heartbeat build's handover.
func completePath() (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("find the complete agent: %w", err)
	}
	path := completeAgent
	if path == "" {
		path = "monky-deployd"
	}
	if !filepath.IsAbs(path) {
		path = filepath.Join(filepath.Dir(self), path)
	}
	si, err := os.Stat(self)
	if err != nil {
		return "", fmt.Errorf("find the complete agent: %w", err)
	}
	pi, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("the complete agent: %w", err)
	}
	if os.SameFile(si, pi) {
		return "", fmt.Errorf("the complete agent %s is this heartbeat build", path)
	}
	return path, nil
}
