package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/tikali/monky-deployd/internal/config"
	"github.com/tikali/monky-deployd/internal/version"
	"github.com/tikali/monky-deployd/internal/vocab"
	"github.com/tikali/monky-deployd/states"
	"github.com/tikali/monky-deployd/store"
	"github.com/tikali/monky-deployd/transport"
)

// resumeCommand is `resume`: clear what parked the machine after a manual fix.
func resumeCommand(stdout, stderr io.Writer) *cli.Command {
	return &cli.Command{
		Name:        "resume",
		Usage:       "after a manual fix: clear what parked the machine (refused, failed, blocked)",
		Description: "Examples:\n   monky-deployd resume          # the next tick checks again\n   monky-deployd resume --now    # and run that tick now",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "now", Usage: "also run one tick now"},
			&cli.BoolFlag{Name: "dry-run", Usage: "say what would be cleared; change nothing"},
		},
		Action: func(c *cli.Context) error { return cmdResume(c, stdout, stderr) },
	}
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
	now := c.Bool("now") && !dry
	cleared, held, err := a.ResumeHolding(dry)
	if err != nil {
		return fail(1, "resume: %v", err)
	}
	// --now hands the lock to its tick: no timer tick can run between the two
	defer held.Release()
	if !now {
		held.Release()
	}
	verb := "cleared"
	if dry {
		verb = "would clear"
	}
	if len(cleared) == 0 {
		fmt.Fprintln(stdout, "nothing to clear: the machine is not parked")
	}
	for _, s := range cleared {
		fmt.Fprintf(stdout, "%s: %s\n", verb, s)
	}
	for _, s := range resumeChecks(cfg, before) {
		fmt.Fprintln(stdout, "check: "+s)
	}
	if !now {
		if !dry && len(cleared) > 0 {
			fmt.Fprintln(stdout, "the next tick checks again (or run `monky-deployd resume --now`)")
		}
		return nil
	}
	agent, err := newAgent(cfg, log, st)
	if err != nil {
		return err
	}
	return tickExit(agent.TickHolding(context.Background(), held))
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
	if rec.Refusal != nil && rec.Refusal.Code == vocab.DiskInsufficient {
		out = append(out, "disk: not measured here (that needs docker's data-root); the next tick measures it before anything else")
	}
	if rec.Block != nil && (rec.Block.Code == vocab.AgentUnauthenticated || rec.Block.Code == vocab.CredentialShape) {
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
