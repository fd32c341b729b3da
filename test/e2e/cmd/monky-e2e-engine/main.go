// Command monky-e2e-engine gives `make systemd-e2e` the pieces of `make e2e` it runs the real
// Docker engine with, outside go test:
//
//	monky-e2e-engine compose-plugin VERSION
//	    prints the path of the docker compose v2 plugin of VERSION, built once from the Go
//	    module proxy into the cache make e2e uses ($MONKY_E2E_CACHE)
//	monky-e2e-engine registry --app BIN --tags 1,2 --user U --password-file F --addr-file F
//	    serves go-containerregistry's registry on 127.0.0.1 behind HTTP basic auth, pushes one
//	    image per tag built from the static binary BIN (as make e2e builds them: no base image,
//	    a HEALTHCHECK running BIN -health), writes {"host", "images": {tag: ref}} to the addr
//	    file (last, when all is pushed) and serves until SIGINT or SIGTERM
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/tikali/monky-deployd/test/e2e/registry"
	"github.com/tikali/monky-deployd/test/e2e/tools"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "monky-e2e-engine:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return errors.New("usage: monky-e2e-engine compose-plugin VERSION | registry [flags]")
	}
	switch args[0] {
	case "compose-plugin":
		if len(args) != 2 {
			return errors.New("usage: monky-e2e-engine compose-plugin VERSION")
		}
		p, err := tools.ComposePlugin(args[1])
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(stdout, p)
		return err
	case "registry":
		return serveRegistry(args[1:], stderr)
	}
	return fmt.Errorf("unknown command %q", args[0])
}

func serveRegistry(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("registry", flag.ContinueOnError)
	fs.SetOutput(stderr)
	app := fs.String("app", "", "the static test binary each image holds (test/e2e/testapp)")
	tags := fs.String("tags", "1,2", "comma-separated tags of monky-e2e/app to push")
	repo := fs.String("repo", "monky-e2e/app", "repository of the images")
	user := fs.String("user", "deployer", "the registry's user")
	pwFile := fs.String("password-file", "", "file holding the registry's password")
	addrFile := fs.String("addr-file", "", "write the host and the image references as JSON here")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *app == "" || *pwFile == "" || *addrFile == "" {
		return errors.New("registry needs --app, --password-file and --addr-file")
	}
	raw, err := os.ReadFile(*pwFile)
	if err != nil {
		return err
	}
	pw := strings.TrimSpace(string(raw))
	if pw == "" {
		return fmt.Errorf("%s is empty", *pwFile)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	r, err := registry.Serve(*user, pw, stderr)
	if err != nil {
		return err
	}
	defer r.Close()
	out := struct {
		Host   string            `json:"host"`
		Images map[string]string `json:"images"`
	}{Host: r.Host, Images: map[string]string{}}
	for _, tag := range strings.Split(*tags, ",") {
		ref, err := r.Push(*app, registry.Image{Repo: *repo, Tag: tag, Env: []string{"APP_VERSION=" + tag}})
		if err != nil {
			return err
		}
		out.Images[tag] = ref
	}
	b, err := json.Marshal(out)
	if err != nil {
		return err
	}
	tmp := *addrFile + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, *addrFile); err != nil {
		return err
	}
	<-ctx.Done()
	return nil
}
