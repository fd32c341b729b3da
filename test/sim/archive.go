package sim

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"time"

	"github.com/tikali/monky-deployd/internal/bundle"
)

// completeBundle returns files with bundle.json completed: a given bundle.json is merged
// (its keys kept), env_id and files[] are set, compose_file and secrets_provider defaulted.
func completeBundle(envID string, files map[string][]byte) (map[string][]byte, error) {
	meta := map[string]any{}
	if raw, ok := files["bundle.json"]; ok {
		if err := json.Unmarshal(raw, &meta); err != nil {
			return nil, fmt.Errorf("partial bundle.json: %w", err)
		}
		if meta == nil {
			meta = map[string]any{}
		}
	}
	out := make(map[string][]byte, len(files)+1)
	list := make([]string, 0, len(files))
	for p, b := range files {
		if err := validPath(p); err != nil {
			return nil, err
		}
		if p == "bundle.json" {
			continue
		}
		out[p] = append([]byte(nil), b...)
		list = append(list, p)
	}
	sort.Strings(list)
	meta["env_id"] = envID
	meta["files"] = list
	if _, ok := meta["compose_file"]; !ok {
		meta["compose_file"] = "compose.yaml"
	}
	if _, ok := meta["secrets_provider"]; !ok {
		meta["secrets_provider"] = "openbao"
	}
	if _, ok := meta["agent"]; !ok {
		meta["agent"] = map[string]bool{"allow_privileged": false, "allow_rollback": false, "revert_on_failure": false}
	}
	b, err := json.MarshalIndent(meta, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode bundle.json: %w", err)
	}
	out["bundle.json"] = append(b, '\n')
	return out, nil
}

// archiveTime is every entry's mtime, so that the same files give the same archive bytes.
var archiveTime = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// buildArchive returns tenancy's sha of files and a plain tar of them (parent directories
// first, files in path order, regular files 0644, directories 0755).
func buildArchive(files map[string][]byte) (string, []byte, error) {
	paths := make([]string, 0, len(files))
	dirs := map[string]bool{}
	for p := range files {
		paths = append(paths, p)
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	for d := range dirs {
		if _, clash := files[d]; clash {
			return "", nil, fmt.Errorf("path %q is both a file and a directory", d)
		}
	}
	type entry struct {
		name string
		dir  bool
	}
	entries := make([]entry, 0, len(paths)+len(dirs))
	for d := range dirs {
		entries = append(entries, entry{d + "/", true})
	}
	for _, p := range paths {
		entries = append(entries, entry{p, false})
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].name < entries[j].name })

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, ModTime: archiveTime, Uname: "root", Gname: "root"}
		if e.dir {
			h.Typeflag, h.Mode = tar.TypeDir, 0o755
		} else {
			h.Typeflag, h.Mode, h.Size = tar.TypeReg, 0o644, int64(len(files[e.name]))
		}
		if err := tw.WriteHeader(h); err != nil {
			return "", nil, fmt.Errorf("tar header %s: %w", e.name, err)
		}
		if !e.dir {
			if _, err := tw.Write(files[e.name]); err != nil {
				return "", nil, fmt.Errorf("tar write %s: %w", e.name, err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		return "", nil, fmt.Errorf("tar close: %w", err)
	}
	return bundle.Sha(files), buf.Bytes(), nil
}

func gzipBytes(b []byte) ([]byte, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		return nil, fmt.Errorf("gzip: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("gzip: %w", err)
	}
	return buf.Bytes(), nil
}

// ReadReleaseDir reads every regular file under dir into a map keyed by slash-separated
// relative path. A symlink or any other non-regular file is an error.
func ReadReleaseDir(dir string) (map[string][]byte, error) {
	files := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s: not a regular file", p)
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		files[filepath.ToSlash(rel)] = b
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read release dir: %w", err)
	}
	return files, nil
}

// AddReleaseDir adds the files under dir as release name of envID (see AddRelease).
func (s *Sim) AddReleaseDir(envID, name, dir string) (string, error) {
	files, err := ReadReleaseDir(dir)
	if err != nil {
		return "", err
	}
	return s.AddRelease(envID, name, files)
}
