// Package bundlecheck answers "would a box apply this bundle?" without a box: it reads a bundle
// archive (or packs an unpacked bundle directory) and runs on it the very functions a tick
// runs before any lease — bundle.Read, then model.Check, then the rollback rule — and lists
// what a box would refuse, one finding a line. `monky-deployd check bundle` and the
// simulator's release publishing use it.
//
// It reads the archive or the directory and nothing else: no config, no state file, no
// network, no docker. model.Check's private scratch copy (under the system's temporary
// directory) is removed before Run returns.
package bundlecheck

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/tikali/monky-deployd/internal/bundle"
	"github.com/tikali/monky-deployd/internal/model"
	"github.com/tikali/monky-deployd/internal/vocab"
)

// Options are the box's facts a bundle is checked against; the zero value checks a bundle as
// its own env's box would see it for the first time.
type Options struct {
	// EnvID is the box's env_id; "" means the bundle's own (bundle.json env_id).
	EnvID string
	// KVMount is the KV mount the manifest's paths must lie in; "" means "monky".
	KVMount string
	// Rollback checks the bundle as a rollback: a sha the box applied before, which it
	// applies only when bundle.json sets agent.allow_rollback.
	Rollback bool
	// MaxBytes is max_bundle_bytes; ≤ 0 means the default (64 MiB).
	MaxBytes int64
	// Project is the compose project name; "" means monky-<env_id>.
	Project string
}

// Finding is one thing a box would refuse: the refusal code and what it names (the service
// and the field for PRIVILEGED_REFUSED; a file, a variable, a path for the others).
type Finding struct {
	Code   vocab.Code
	Detail string
}

func (f Finding) String() string {
	if f.Detail == "" {
		return string(f.Code)
	}
	return string(f.Code) + ": " + f.Detail
}

// Result is what Run found: the bundle's sha and env when it could be read, and the findings
// (none: a box would apply it).
type Result struct {
	Sha      string
	EnvID    string
	Findings []Finding
}

// privilegedHint closes model.Check's PRIVILEGED_REFUSED detail; each finding's line goes
// without it and the hint follows once.
const privilegedHint = " (bundle.json agent.allow_privileged is not set)"

// Run checks archive (a tar, gzip-compressed or not) as a box would before any lease.
func Run(archive []byte, o Options) Result {
	return RunFrom(bytes.NewReader(archive), int64(len(archive)), o)
}

// RunFrom is Run of the size bytes of src, read as a box reads a fetched bundle: its large
// files streamed, never held.
func RunFrom(src io.ReaderAt, size int64, o Options) Result {
	max := o.MaxBytes
	if max <= 0 {
		max = bundle.DefaultMaxBytes
	}
	b, err := bundle.ReadFrom(src, size, max)
	if err != nil {
		return Result{Findings: findings(err)}
	}
	res := Result{Sha: b.Sha, EnvID: b.Meta.EnvID}
	env := o.EnvID
	if env == "" {
		env = b.Meta.EnvID
	}
	in := model.CheckInput{DesiredSha: b.Sha, EnvID: env, KVMount: o.KVMount,
		Compose: model.ComposeEnv{Project: o.Project}} // as the tick: compose sees none of the agent's environment
	if r := model.Check(b, in); r != nil {
		res.Findings = findings(r)
		return res
	}
	if o.Rollback && !b.Meta.Agent.AllowRollback {
		res.Findings = []Finding{{Code: vocab.RollbackRefused, Detail: "a box that applied " + b.Sha[:12] +
			" before refuses to return to it: bundle.json agent.allow_rollback is not set"}}
	}
	return res
}

// findings turns a refusal into lines: PRIVILEGED_REFUSED's detail lists its findings
// separated by "; ", one line each.
func findings(err error) []Finding {
	var r *bundle.Refusal
	if !errors.As(err, &r) {
		return []Finding{{Code: vocab.BundleInvalid, Detail: err.Error()}}
	}
	if r.Code != vocab.PrivilegedRefused {
		return []Finding{{Code: r.Code, Detail: r.Detail}}
	}
	detail, hinted := strings.CutSuffix(r.Detail, privilegedHint)
	var out []Finding
	for _, d := range strings.Split(detail, "; ") {
		out = append(out, Finding{Code: r.Code, Detail: d})
	}
	if hinted {
		out[len(out)-1].Detail += privilegedHint
	}
	return out
}

// OpenArchive opens a bundle archive file for RunFrom (the caller closes it) and says its size: a
// file bigger than max bytes (≤ 0: the default) and its headers' room is refused as the tick's
// download would be; anything but a regular file is an error, never read (a FIFO would block).
func OpenArchive(path string, max int64) (*os.File, int64, *Finding, error) {
	if max <= 0 {
		max = bundle.DefaultMaxBytes
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, 0, nil, err
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = fmt.Errorf("%s is not a regular file", path)
	}
	if err != nil {
		f.Close()
		return nil, 0, nil, err
	}
	// a gzip archive of max bytes of content is smaller than max; a plain tar is a little
	// bigger (headers): the bound is Read's, this one only refuses early
	if limit := max + max/8 + 1<<20; fi.Size() > limit {
		f.Close()
		return nil, 0, &Finding{Code: vocab.BundleInvalid, Detail: fmt.Sprintf("the archive is larger than %d bytes", limit)}, nil
	}
	return f, fi.Size(), nil, nil
}

// packTime is every packed entry's mtime: the sha does not depend on it, the bytes need one.
var packTime = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Pack writes the unpacked bundle in dir as a plain tar, every entry as it is on disk — a
// symlink as a symlink, a FIFO as a FIFO, a setuid bit kept — so that bundle.Read refuses
// what the tick would refuse in the archive tenancy serves. It follows no symlink.
func Pack(dir string) ([]byte, error) {
	var buf bytes.Buffer
	if err := PackTo(dir, &buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// PackTo is Pack written to w, file by file: nothing of the tree is held.
func PackTo(dir string, w io.Writer) error {
	tw := tar.NewWriter(w)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		link := ""
		if fi.Mode()&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		}
		h, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		h.Name = filepath.ToSlash(rel)
		if fi.IsDir() {
			h.Name += "/"
		}
		h.Uid, h.Gid, h.Uname, h.Gname = 0, 0, "", ""
		h.ModTime, h.AccessTime, h.ChangeTime = packTime, time.Time{}, time.Time{}
		h.Format = tar.FormatPAX
		if err := tw.WriteHeader(h); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		if !fi.Mode().IsRegular() {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(tw, f)
		return err
	})
	if err != nil {
		return err
	}
	return tw.Close()
}
