package main

import (
	"fmt"
	"io"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/tikali/monky-deployd/internal/bundle"
	"github.com/tikali/monky-deployd/internal/bundlecheck"
	"github.com/tikali/monky-deployd/internal/model"
	"github.com/tikali/monky-deployd/internal/sanitize"
	"github.com/tikali/monky-deployd/machine"
)

func checkBundleCommand(stdout io.Writer) *cli.Command {
	return &cli.Command{
		Name:      "bundle",
		Usage:     "would a box apply this bundle? every refusal a tick decides before the lease",
		ArgsUsage: "DIR|FILE.tar[.gz]",
		Description: "Runs the tick's own checks (PROTOCOL.md §2 and the privileged policy) on an unpacked bundle\n" +
			"   directory or an archive: one line per finding, CODE: what it names (the service and the field\n" +
			"   for PRIVILEGED_REFUSED). A box refuses with the first code in PROTOCOL.md's order, so a\n" +
			"   bundle wrong in two ways shows the second once the first is fixed. DISK_INSUFFICIENT needs\n" +
			"   the box's disks and is not checked. Needs no config and reads nothing else.\n\n" +
			"Examples:\n   monky-deployd check bundle ./release/\n" +
			"   monky-deployd check bundle --env env-qa-02 bundle.tar.gz   # as env-qa-02's box sees it\n" +
			"   monky-deployd check bundle --allow-rollback v1.tar.gz      # boxes may be rolled back to it",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "env", Usage: "the box's env_id (default: the bundle's own, bundle.json env_id)"},
			&cli.BoolFlag{Name: "allow-rollback", Usage: "check it as a rollback target (a sha boxes applied before): ROLLBACK_REFUSED unless bundle.json sets agent.allow_rollback"},
			&cli.StringFlag{Name: "kv-mount", Value: model.DefaultKVMount, Usage: "the KV mount the manifest's paths must lie in (the box's bao.kv_mount)"},
			&cli.Int64Flag{Name: "max-bytes", Value: bundle.DefaultMaxBytes, Usage: "the box's max_bundle_bytes"},
		},
		Action: func(c *cli.Context) error { return cmdCheckBundle(c, stdout) },
	}
}

func cmdCheckBundle(c *cli.Context, stdout io.Writer) error {
	switch {
	case c.NArg() == 0:
		return usageErr(c, "name a bundle: a directory or a .tar[.gz] file")
	case c.NArg() > 1:
		return usageErr(c, "unexpected argument %q", c.Args().Get(1))
	}
	path := c.Args().First()
	fi, err := os.Stat(path)
	if err != nil {
		return fail(1, "check bundle: %v", err)
	}
	var archive *os.File
	var size int64
	if fi.IsDir() {
		// packed into a private temporary file, file by file: a large tree is never held
		if archive, err = os.CreateTemp("", "monky-deployd-check-*.tar"); err != nil {
			return fail(1, "check bundle: %v", err)
		}
		defer os.Remove(archive.Name())
		if err = bundlecheck.PackTo(path, archive); err != nil {
			archive.Close()
			return fail(1, "check bundle: %v", err)
		}
		if size, err = archive.Seek(0, io.SeekCurrent); err != nil {
			archive.Close()
			return fail(1, "check bundle: %v", err)
		}
	} else {
		var big *bundlecheck.Finding
		if archive, size, big, err = bundlecheck.OpenArchive(path, c.Int64("max-bytes")); err != nil {
			return fail(1, "check bundle: %v", err)
		}
		if big != nil {
			return printFindings(stdout, path, bundlecheck.Result{Findings: []bundlecheck.Finding{*big}})
		}
	}
	defer archive.Close()
	res := bundlecheck.RunFrom(archive, size, bundlecheck.Options{EnvID: c.String("env"), KVMount: c.String("kv-mount"),
		Rollback: c.Bool("allow-rollback"), MaxBytes: c.Int64("max-bytes")})
	return printFindings(stdout, path, res)
}

// printFindings writes one line per finding (exit 1), or the one line saying a box would apply
// the bundle (exit 0).
func printFindings(stdout io.Writer, path string, res bundlecheck.Result) error {
	if len(res.Findings) == 0 {
		_, err := fmt.Fprintf(stdout, "bundle %s: ok: sha %s, env %s: a box would apply it\n", sanitize.Line(path), machine.ShortSha(res.Sha), sanitize.Line(res.EnvID))
		return err
	}
	for _, f := range res.Findings {
		fmt.Fprintln(stdout, sanitize.Line(f.String()))
	}
	return &exitError{code: 1}
}
