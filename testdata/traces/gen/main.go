// Command gen serves the simulator (package sim) on loopback like `monky-sim serve`, with the
// knobs the monky-sim CLI does not offer, for testdata/traces/record.sh: a release whose archive
// does not hash to the sha tenancy names, a release rendered for another env, and leases in the
// retired AppRole shape. The traces are still recorded by the real agent binary. It never
// dials anything and never prints a token, a grant or a secret value.
//
//	go run ./testdata/traces/gen --releases DIR --env ENV --kit DIR --addr-file F \
//	    [--tampered NAME] [--foreign-env NAME=ENV] [--lease-shape approle] [--docker-bin B]
package main

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/tikali/monky-deployd/internal/bundle"
	"github.com/tikali/monky-deployd/test/sim"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "gen: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	releases := flag.String("releases", "", "directory whose subdirectories are releases")
	envID := flag.String("env", "", "env_id")
	kit := flag.String("kit", "", "install kit directory")
	addrFile := flag.String("addr-file", "", "write the three URLs as JSON here")
	dockerBin := flag.String("docker-bin", "", "kit: docker_bin")
	tampered := flag.String("tampered", "", "release NAME: served as release NAME-tampered under NAME's sha with one byte changed")
	foreign := flag.String("foreign-env", "", "NAME=ENV: served as release NAME-foreign, rendered for ENV")
	shape := flag.String("lease-shape", "", `"approle": answer leases in the retired AppRole shape`)
	flag.Parse()
	if *envID == "" || *releases == "" || *kit == "" || *addrFile == "" {
		return fmt.Errorf("--releases, --env, --kit and --addr-file are required")
	}
	s, err := sim.New(sim.Options{Logf: func(string, ...any) {}})
	if err != nil {
		return err
	}
	s.AddEnv(*envID)
	if _, err := s.LoadReleasesDir(*envID, *releases); err != nil {
		return err
	}
	if *tampered != "" {
		sha, archive, ok := s.Release(*envID, *tampered)
		if !ok {
			return fmt.Errorf("no release %s", *tampered)
		}
		files, err := untar(archive)
		if err != nil {
			return err
		}
		files["compose.yaml"] = append(files["compose.yaml"], []byte("# edited after publishing\n")...)
		raw, err := tarFiles(files)
		if err != nil {
			return err
		}
		s.AddRawRelease(*envID, *tampered+"-tampered", sha, raw)
	}
	if name, other, ok := strings.Cut(*foreign, "="); ok {
		_, archive, found := s.Release(*envID, name)
		if !found {
			return fmt.Errorf("no release %s", name)
		}
		files, err := untar(archive)
		if err != nil {
			return err
		}
		var meta map[string]any
		if err := json.Unmarshal(files["bundle.json"], &meta); err != nil {
			return fmt.Errorf("bundle.json: %w", err)
		}
		meta["env_id"] = other
		b, _ := json.MarshalIndent(meta, "", "  ")
		files["bundle.json"] = append(b, '\n')
		raw, err := tarFiles(files)
		if err != nil {
			return err
		}
		s.AddRawRelease(*envID, name+"-foreign", bundle.Sha(files), raw)
	}
	if *shape != "" {
		s.SetLeaseShape(*envID, *shape)
	}

	servers, err := s.Listen("127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer servers.Close()
	addrs := servers.Addrs
	if err := s.WriteKit(*kit, sim.Kit{EnvID: *envID, TenancyURL: addrs.Tenancy, BaoURL: addrs.Bao,
		DockerBin: *dockerBin}); err != nil {
		return err
	}
	if err := addrs.WriteFile(*addrFile); err != nil {
		return fmt.Errorf("addr file: %w", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return servers.Serve(ctx)
}

// untar reads the regular files of a plain tar.
func untar(archive []byte) (map[string][]byte, error) {
	files := map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(archive))
	for {
		h, err := tr.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return files, nil
			}
			return nil, fmt.Errorf("untar: %w", err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		var buf bytes.Buffer
		if _, err := buf.ReadFrom(tr); err != nil {
			return nil, fmt.Errorf("untar %s: %w", h.Name, err)
		}
		files[h.Name] = buf.Bytes()
	}
}

// tarFiles writes files as a plain tar, parent directories first, in path order.
func tarFiles(files map[string][]byte) ([]byte, error) {
	names := map[string]bool{}
	for p := range files {
		names[p] = false
		for d := filepath.Dir(p); d != "."; d = filepath.Dir(d) {
			names[d+"/"] = true
		}
	}
	order := make([]string, 0, len(names))
	for n := range names {
		order = append(order, n)
	}
	sort.Strings(order)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, n := range order {
		h := &tar.Header{Name: n, Mode: 0o644, Size: int64(len(files[n])), Typeflag: tar.TypeReg, ModTime: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
		if names[n] {
			h.Mode, h.Size, h.Typeflag = 0o755, 0, tar.TypeDir
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("tar %s: %w", n, err)
		}
		if !names[n] {
			if _, err := tw.Write(files[n]); err != nil {
				return nil, fmt.Errorf("tar %s: %w", n, err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("tar: %w", err)
	}
	return buf.Bytes(), nil
}
