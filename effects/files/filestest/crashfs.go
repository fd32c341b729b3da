// Package filestest holds CrashFS, the files.FS test double that models what survives a
// power loss. Test code only: the agent's binaries never import it.
package filestest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/tikali/monky-deployd/effects/files"
)

// realFS is the real filesystem CrashFS performs every operation on.
var realFS = files.OS

// ErrCrashed is what every CrashFS operation returns once the machine has lost power, and
// the value CrashFS panics with at its crash point.
var ErrCrashed = errors.New("power lost")

// CrashFS is an FS for power-loss tests. It performs every operation on the real directory
// tree under root (so code reading the disk directly sees what the agent wrote) and keeps a
// model of what is durable under POSIX rules: a file's content and mode only after an fsync
// of that file; a directory entry (create, rename, remove, symlink) only after an fsync of
// its parent directory. Crash rewrites the tree under root to its durable state.
//
// Paths outside root pass through to OS and are neither counted nor modelled. Entries under
// root that no CrashFS operation touched and the snapshot skipped (such as the bbolt state
// file, which fsyncs itself) are left alone.
type CrashFS struct {
	// IgnoreDirSync makes SyncDir a no-op in the model: the mutant that forgets every
	// directory fsync. A power-loss test must report it.
	IgnoreDirSync bool
	// SkipDirSync, when set, makes SyncDir of the directories it names a no-op in the model:
	// the mutant that forgets one directory fsync.
	SkipDirSync func(dir string) bool

	mu      sync.Mutex
	root    string
	top     *node
	skip    func(rel string) bool
	ops     int
	crashAt int
	crashed bool
	log     []string
}

type node struct {
	kind   byte // 'f' file, 'd' dir, 'l' symlink
	mode   fs.FileMode
	data   []byte // file content as the disk shows it
	target string // symlink target
	kids   map[string]*node

	smode fs.FileMode // durable mode (file)
	sdata []byte      // durable content (file)
	skids map[string]*node
}

// NewCrashFS models the tree under root, which must exist; what is on disk now counts as
// durable. skip (nil: none) names paths, relative to root, that are not the seam's (the
// bbolt file and the tick lock): they are not snapshotted and Crash leaves them alone.
func NewCrashFS(root string, skip func(rel string) bool) (*CrashFS, error) {
	if skip == nil {
		skip = func(string) bool { return false }
	}
	c := &CrashFS{root: filepath.Clean(root), skip: skip}
	top, err := c.snapshot(c.root, ".")
	if err != nil {
		return nil, err
	}
	if top.kind != 'd' {
		return nil, fmt.Errorf("crashfs: %s is not a directory", root)
	}
	c.top = top
	return c, nil
}

func (c *CrashFS) snapshot(path, rel string) (*node, error) {
	st, err := os.Lstat(path)
	if err != nil {
		return nil, fmt.Errorf("crashfs: %w", err)
	}
	n := &node{mode: st.Mode().Perm()}
	n.smode = n.mode
	switch {
	case st.Mode()&fs.ModeSymlink != 0:
		n.kind = 'l'
		if n.target, err = os.Readlink(path); err != nil {
			return nil, fmt.Errorf("crashfs: %w", err)
		}
	case st.IsDir():
		n.kind = 'd'
		n.kids, n.skids = map[string]*node{}, map[string]*node{}
		entries, err := os.ReadDir(path)
		if err != nil {
			return nil, fmt.Errorf("crashfs: %w", err)
		}
		for _, e := range entries {
			r := filepath.Join(rel, e.Name())
			if c.skip(r) {
				continue
			}
			k, err := c.snapshot(filepath.Join(path, e.Name()), r)
			if err != nil {
				return nil, err
			}
			n.kids[e.Name()], n.skids[e.Name()] = k, k
		}
	default:
		n.kind = 'f'
		if n.data, err = os.ReadFile(path); err != nil {
			return nil, fmt.Errorf("crashfs: %w", err)
		}
		n.sdata = n.data
	}
	return n, nil
}

// CrashAt arms the crash: the nth modelled operation from now (1 = the next one) panics
// with ErrCrashed before it touches the disk, and every operation after it fails with
// ErrCrashed. 0 disarms.
func (c *CrashFS) CrashAt(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ops, c.crashAt = 0, n
}

// Ops is how many modelled operations ran since the last CrashAt or Crash.
func (c *CrashFS) Ops() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ops
}

// Log lists the modelled operations since the last CrashAt or Crash, one per line.
func (c *CrashFS) Log() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.log...)
}

// rel maps an absolute path to its components under root; ok is false outside root.
func (c *CrashFS) rel(path string) ([]string, bool) {
	r, err := filepath.Rel(c.root, filepath.Clean(path))
	if err != nil || r == ".." || strings.HasPrefix(r, "../") || filepath.IsAbs(r) {
		return nil, false
	}
	if r == "." {
		return nil, true
	}
	return strings.Split(r, string(filepath.Separator)), true
}

// step counts a modelled operation; it panics at the crash point. Called with mu held
// and a deferred Unlock.
func (c *CrashFS) step(op, path string) error {
	if c.crashed {
		return ErrCrashed
	}
	c.ops++
	if c.crashAt > 0 && c.ops >= c.crashAt {
		c.crashed = true
		panic(ErrCrashed) // the caller's deferred Unlock runs while the panic unwinds
	}
	rel, _ := filepath.Rel(c.root, path)
	c.log = append(c.log, op+" "+rel)
	return nil
}

// dir finds the directory node at parts, adopting as durable any directory created on
// disk outside the seam.
func (c *CrashFS) dir(parts []string) (*node, error) {
	n := c.top
	for i, p := range parts {
		k, ok := n.kids[p]
		if !ok {
			full := filepath.Join(append([]string{c.root}, parts[:i+1]...)...)
			st, err := os.Lstat(full)
			if err != nil || !st.IsDir() {
				return nil, fmt.Errorf("crashfs: %s: %w", full, fs.ErrNotExist)
			}
			k = &node{kind: 'd', mode: st.Mode().Perm(), smode: st.Mode().Perm(), kids: map[string]*node{}, skids: map[string]*node{}}
			n.kids[p], n.skids[p] = k, k
		}
		if k.kind != 'd' {
			return nil, fmt.Errorf("crashfs: %s is not a directory", strings.Join(parts[:i+1], "/"))
		}
		n = k
	}
	return n, nil
}

func (c *CrashFS) lookup(parts []string) *node {
	if len(parts) == 0 {
		return c.top
	}
	d, err := c.dir(parts[:len(parts)-1])
	if err != nil {
		return nil
	}
	return d.kids[parts[len(parts)-1]]
}

// parent resolves path's parent node and base name; model is false outside root.
func (c *CrashFS) parent(path string) (d *node, name string, model bool, err error) {
	parts, ok := c.rel(path)
	if !ok {
		return nil, "", false, nil
	}
	if len(parts) == 0 {
		return nil, "", true, fmt.Errorf("crashfs: %s is the root", path)
	}
	d, err = c.dir(parts[:len(parts)-1])
	return d, parts[len(parts)-1], true, err
}

// onPath runs a modelled operation named op on path: outside root only real runs; inside,
// the step (the crash point) comes first, then real, then update changes the model at path's
// parts.
func (c *CrashFS) onPath(op, path string, real func() error, update func(parts []string) error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	parts, model := c.rel(path)
	if !model {
		return real()
	}
	if err := c.step(op, path); err != nil {
		return err
	}
	if err := real(); err != nil {
		return err
	}
	return update(parts)
}

// inParent is onPath for an operation that creates path: update gets path's parent node and
// base name. A parent the model cannot resolve fails the operation after its step.
func (c *CrashFS) inParent(op, path string, real func() error, update func(d *node, name string)) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	d, name, model, err := c.parent(path)
	if !model {
		return real()
	}
	if err := c.step(op, path); err != nil {
		return err
	}
	if err != nil {
		return err
	}
	if err := real(); err != nil {
		return err
	}
	update(d, name)
	return nil
}

func (c *CrashFS) WriteFile(path string, data []byte, perm fs.FileMode) error {
	return c.inParent("write", path, func() error { return realFS.WriteFile(path, data, perm) }, func(d *node, name string) {
		d.kids[name] = &node{kind: 'f', mode: perm.Perm(), data: bytes.Clone(data), smode: perm.Perm()}
	})
}

// WriteFileFrom is WriteFile of r read whole: the double keeps every byte in memory anyway.
func (c *CrashFS) WriteFileFrom(path string, r io.Reader, perm fs.FileMode) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	return c.WriteFile(path, data, perm)
}

func (c *CrashFS) SyncFile(path string) error {
	return c.onPath("fsync", path, func() error { return realFS.SyncFile(path) }, func(parts []string) error {
		if n := c.lookup(parts); n != nil && n.kind == 'f' {
			n.sdata, n.smode = bytes.Clone(n.data), n.mode
		}
		return nil
	})
}

func (c *CrashFS) SyncDir(dir string) error {
	return c.onPath("fsync-dir", dir, func() error { return realFS.SyncDir(dir) }, func(parts []string) error {
		n := c.lookup(parts)
		if n == nil || n.kind != 'd' {
			return fmt.Errorf("crashfs: sync %s: %w", dir, fs.ErrNotExist)
		}
		if !c.IgnoreDirSync && (c.SkipDirSync == nil || !c.SkipDirSync(filepath.Clean(dir))) {
			n.skids = make(map[string]*node, len(n.kids))
			for k, v := range n.kids {
				n.skids[k] = v
			}
		}
		return nil
	})
}

func (c *CrashFS) Mkdir(path string, perm fs.FileMode) error {
	return c.inParent("mkdir", path, func() error { return realFS.Mkdir(path, perm) }, func(d *node, name string) {
		d.kids[name] = c.newDir(path)
	})
}

func (c *CrashFS) newDir(path string) *node {
	m := fs.FileMode(0o700)
	if st, err := os.Lstat(path); err == nil {
		m = st.Mode().Perm()
	}
	return &node{kind: 'd', mode: m, smode: m, kids: map[string]*node{}, skids: map[string]*node{}}
}

func (c *CrashFS) MkdirAll(path string, perm fs.FileMode) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	parts, model := c.rel(path)
	if !model {
		return realFS.MkdirAll(path, perm)
	}
	if err := c.step("mkdir-all", path); err != nil {
		return err
	}
	// the part of path above root is not the model's: create it first
	if err := realFS.MkdirAll(c.root, perm); err != nil {
		return err
	}
	n := c.top
	cur := c.root
	for _, p := range parts {
		cur = filepath.Join(cur, p)
		k, ok := n.kids[p]
		if !ok {
			if err := os.Mkdir(cur, perm); err != nil && !errors.Is(err, fs.ErrExist) {
				return err
			}
			st, err := os.Lstat(cur)
			if err != nil {
				return err
			}
			if !st.IsDir() {
				return fmt.Errorf("mkdir %s: not a directory", cur)
			}
			k = c.newDir(cur)
			n.kids[p] = k
		}
		if k.kind != 'd' {
			return fmt.Errorf("mkdir %s: not a directory", cur)
		}
		n = k
	}
	return nil
}

func (c *CrashFS) Chmod(path string, perm fs.FileMode) error {
	return c.onPath("chmod", path, func() error { return realFS.Chmod(path, perm) }, func(parts []string) error {
		if n := c.lookup(parts); n != nil {
			n.mode = perm.Perm()
			if n.kind == 'd' { // directory metadata: journalled with the inode
				n.smode = n.mode
			}
		}
		return nil
	})
}

func (c *CrashFS) Rename(oldpath, newpath string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	od, oname, omodel, oerr := c.parent(oldpath)
	nd, nname, nmodel, nerr := c.parent(newpath)
	if !omodel && !nmodel {
		return realFS.Rename(oldpath, newpath)
	}
	if omodel != nmodel {
		return fmt.Errorf("crashfs: rename %s across the model's root", oldpath)
	}
	if err := c.step("rename", oldpath+" -> "+newpath); err != nil {
		return err
	}
	if err := errors.Join(oerr, nerr); err != nil {
		return err
	}
	if err := realFS.Rename(oldpath, newpath); err != nil {
		return err
	}
	n := od.kids[oname]
	delete(od.kids, oname)
	if n != nil {
		nd.kids[nname] = n
	}
	return nil
}

func (c *CrashFS) Symlink(target, link string) error {
	return c.inParent("symlink", link, func() error { return realFS.Symlink(target, link) }, func(d *node, name string) {
		d.kids[name] = &node{kind: 'l', target: target, mode: 0o777, smode: 0o777}
	})
}

func (c *CrashFS) Remove(path string) error { return c.remove(path, false) }

func (c *CrashFS) RemoveAll(path string) error { return c.remove(path, true) }

func (c *CrashFS) remove(path string, all bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	d, name, model, err := c.parent(path)
	if !model {
		if all {
			return realFS.RemoveAll(path)
		}
		return realFS.Remove(path)
	}
	if err := c.step("remove", path); err != nil {
		return err
	}
	if err != nil {
		if all && errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	if all {
		err = realFS.RemoveAll(path)
	} else {
		err = realFS.Remove(path)
	}
	if err != nil {
		return err
	}
	delete(d.kids, name)
	return nil
}

func (c *CrashFS) reading() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.crashed {
		return ErrCrashed
	}
	return nil
}

func (c *CrashFS) ReadFile(path string) ([]byte, error) {
	if err := c.reading(); err != nil {
		return nil, err
	}
	return realFS.ReadFile(path)
}

func (c *CrashFS) Readlink(path string) (string, error) {
	if err := c.reading(); err != nil {
		return "", err
	}
	return realFS.Readlink(path)
}

func (c *CrashFS) Lstat(path string) (fs.FileInfo, error) {
	if err := c.reading(); err != nil {
		return nil, err
	}
	return realFS.Lstat(path)
}

func (c *CrashFS) ReadDir(dir string) ([]fs.DirEntry, error) {
	if err := c.reading(); err != nil {
		return nil, err
	}
	return realFS.ReadDir(dir)
}

// Crash loses power: the tree under root is rewritten to what was durable (entries not in a
// synced directory vanish, removed entries not synced come back, file content falls back to
// its last fsync), the model restarts from it with everything durable, and the crash point
// is disarmed. Entries the model never knew are left alone.
func (c *CrashFS) Crash() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	durable := map[string]*node{}
	if err := walk(c.top, ".", true, durable, 0); err != nil {
		return err
	}
	shown := map[string]*node{}
	if err := walk(c.top, ".", false, shown, 0); err != nil {
		return err
	}
	// drop what the disk shows and the durable tree lacks (or holds as another kind)
	for _, p := range slices.Sorted(maps.Keys(shown)) {
		if d, ok := durable[p]; !ok || d.kind != shown[p].kind || d.kind == 'l' && d.target != shown[p].target {
			if err := os.RemoveAll(filepath.Join(c.root, p)); err != nil {
				return fmt.Errorf("crashfs: %w", err)
			}
		}
	}
	// bring back what is durable, parents first
	for _, p := range slices.Sorted(maps.Keys(durable)) {
		d, full := durable[p], filepath.Join(c.root, p)
		st, err := os.Lstat(full)
		switch d.kind {
		case 'd':
			if err != nil {
				if err := os.Mkdir(full, d.smode); err != nil {
					return fmt.Errorf("crashfs: %w", err)
				}
			}
			if err := os.Chmod(full, d.smode); err != nil {
				return fmt.Errorf("crashfs: %w", err)
			}
		case 'l':
			if err != nil {
				if err := os.Symlink(d.target, full); err != nil {
					return fmt.Errorf("crashfs: %w", err)
				}
			}
		case 'f':
			same := false
			if err == nil && st.Mode().IsRegular() && st.Mode().Perm() == d.smode {
				b, rerr := os.ReadFile(full)
				same = rerr == nil && bytes.Equal(b, d.sdata)
			}
			if !same {
				_ = os.RemoveAll(full)
				if err := os.WriteFile(full, d.sdata, d.smode); err != nil {
					return fmt.Errorf("crashfs: %w", err)
				}
				if err := os.Chmod(full, d.smode); err != nil {
					return fmt.Errorf("crashfs: %w", err)
				}
			}
		}
	}
	top, err := c.snapshotModel(c.top, 0)
	if err != nil {
		return err
	}
	c.top = top
	c.ops, c.crashAt, c.crashed, c.log = 0, 0, false, nil
	return nil
}

// snapshotModel copies the durable part of n as a new, wholly durable model.
func (c *CrashFS) snapshotModel(n *node, depth int) (*node, error) {
	if depth > 64 {
		return nil, errors.New("crashfs: durable tree too deep")
	}
	m := &node{kind: n.kind, target: n.target, mode: n.smode, smode: n.smode}
	switch n.kind {
	case 'f':
		m.data, m.sdata = bytes.Clone(n.sdata), bytes.Clone(n.sdata)
	case 'd':
		m.kids, m.skids = map[string]*node{}, map[string]*node{}
		for k, v := range n.skids {
			kid, err := c.snapshotModel(v, depth+1)
			if err != nil {
				return nil, err
			}
			m.kids[k], m.skids[k] = kid, kid
		}
	}
	return m, nil
}

// walk lists the tree below n (durable entries or the disk's) by relative path.
func walk(n *node, rel string, durable bool, out map[string]*node, depth int) error {
	if depth > 64 {
		return errors.New("crashfs: tree too deep")
	}
	kids := n.kids
	if durable {
		kids = n.skids
	}
	for name, k := range kids {
		p := filepath.Join(rel, name)
		out[p] = k
		if k.kind == 'd' {
			if err := walk(k, p, durable, out, depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}
