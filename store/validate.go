package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"
)

// The layout of a bbolt meta page (go.etcd.io/bbolt/internal/common, file format version 2):
// a 16-byte page header, then magic, version, page size, flags (uint32 each), the root bucket
// (root pgid, sequence), the freelist pgid, the high-water pgid, the txid and an FNV-64a
// checksum of everything in the meta before it. Integers are in the machine's byte order.
const (
	pageHeaderSize  = 16
	metaMagic       = 0xED0CDAED
	metaVersion     = 2
	metaSumOffset   = 56 // the checksum's offset within the meta
	metaSize        = metaSumOffset + 8
	pgidNoFreelist  = ^uint64(0)
	minPageSize     = 512
	maxPageSize     = 1 << 16
	defaultPageSize = 4096
)

// ErrCorrupt marks a state file whose bytes are not a usable bbolt file (truncated, bit-flipped,
// zero-length, not a regular file). Errors from the system (permission, lock) never wrap it.
var ErrCorrupt = errors.New("state file is corrupt")

// metaPage is one decoded meta page.
type metaPage struct {
	pageSize uint32
	root     uint64
	freelist uint64
	pgid     uint64 // the high-water mark: pages [0, pgid) are in use or free
	txid     uint64
	err      string // why this meta is not valid ("" when it is)
}

func decodeMeta(b []byte) metaPage {
	if len(b) < pageHeaderSize+metaSize {
		return metaPage{err: "short"}
	}
	m := b[pageHeaderSize : pageHeaderSize+metaSize]
	ne := binary.NativeEndian
	mp := metaPage{
		pageSize: ne.Uint32(m[8:]),
		root:     ne.Uint64(m[16:]),
		freelist: ne.Uint64(m[32:]),
		pgid:     ne.Uint64(m[40:]),
		txid:     ne.Uint64(m[48:]),
	}
	h := fnv.New64a()
	_, _ = h.Write(m[:metaSumOffset])
	switch {
	case ne.Uint32(m[0:]) != metaMagic:
		mp.err = "no bbolt magic"
	case ne.Uint32(m[4:]) != metaVersion:
		mp.err = fmt.Sprintf("bbolt format version %d", ne.Uint32(m[4:]))
	case ne.Uint64(m[metaSumOffset:]) != h.Sum64():
		mp.err = "checksum mismatch"
	case mp.pageSize < minPageSize || mp.pageSize > maxPageSize || mp.pageSize&(mp.pageSize-1) != 0:
		mp.err = fmt.Sprintf("page size %d", mp.pageSize)
	}
	return mp
}

// precheck reads the file's meta pages without mapping it and says what makes it unsafe to
// hand to bbolt ("" when nothing does). bbolt maps the file and trusts its pages: a high-water
// mark past the end of a truncated file is a SIGBUS on first touch, which no recover() catches.
// Both meta pages' checksums are verified; bbolt uses the valid one with the higher txid, so
// one torn meta page (a power loss in mid-commit) is what bbolt recovers from and is accepted.
// err is a fault of the system (permission, I/O), not of the file's bytes. Without tree, the
// walk reads the freelist only (what bbolt's read-write open loads), not the B+tree.
func precheck(path string, timeout time.Duration, tree bool) (problem string, exists bool, err error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		switch {
		case errors.Is(err, os.ErrNotExist):
			return "", false, nil
		case errors.Is(err, syscall.ELOOP):
			return "it is a symlink, not a regular file", true, nil
		}
		return "", true, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", true, err
	}
	if fi.Mode().IsRegular() {
		// bbolt holds an exclusive flock while a writer has the file open: a shared one here
		// means no commit is half-written while the bytes are read
		if err := flockShared(f, timeout); err != nil {
			return "", true, err
		}
	}
	if !fi.Mode().IsRegular() {
		return fmt.Sprintf("it is not a regular file (%s)", fi.Mode().Type()), true, nil
	}
	problem, err = checkBytes(f, fi.Size(), tree)
	return problem, true, err
}

// checkBytes is precheck's look at the bytes of f, a regular file of size bytes under a shared
// lock.
func checkBytes(f *os.File, size int64, tree bool) (problem string, err error) {
	if size == 0 {
		return "it is empty (zero bytes)", nil
	}
	m0, m1, err := readMetas(f)
	if err != nil {
		return "", err
	}
	used, problem := usedMeta(m0, m1, size)
	if problem != "" {
		return problem, nil
	}
	m := m0
	if used == 1 {
		m = m1
	}
	return walkMeta(f, size, used, m, tree)
}

// readMetas decodes f's two meta pages. The second sits one page in: the first meta's page size
// when it is valid, else the sizes bbolt could have been created with.
func readMetas(f *os.File) (m0, m1 metaPage, err error) {
	head := make([]byte, defaultPageSize)
	n, err := f.ReadAt(head, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return m0, m1, err
	}
	m0 = decodeMeta(head[:n])
	sizes := []uint32{4096, 8192, 16384, 65536, 512, 1024, 2048, 32768}
	if m0.err == "" {
		sizes = []uint32{m0.pageSize}
	}
	m1 = metaPage{err: "short"}
	for _, ps := range sizes {
		buf := make([]byte, pageHeaderSize+metaSize)
		k, err := f.ReadAt(buf, int64(ps))
		if err != nil && !errors.Is(err, io.EOF) {
			return m0, m1, err
		}
		if m := decodeMeta(buf[:k]); m.err == "" && m.pageSize == ps {
			m1 = m
			break
		} else if ps == sizes[0] {
			m1 = m
		}
	}
	return m0, m1, nil
}

// usedMeta is which meta page bbolt will open (0 or 1, always a valid one), or what is wrong with
// the pair or with that meta's page numbers in a file of size bytes.
//
// bbolt opens the valid meta with the higher txid and reads nothing through the other: after a
// kill in mid-commit, the older meta's freelist or tree pages may already have been reused by
// the commit that was cut short. Only the meta bbolt will use is checked further.
func usedMeta(m0, m1 metaPage, size int64) (used int, problem string) {
	if m0.err != "" && m1.err != "" {
		return 0, fmt.Sprintf("both meta pages are invalid (meta 0: %s; meta 1: %s)", m0.err, m1.err)
	}
	if m0.err == "" && m1.err == "" && m0.pageSize != m1.pageSize {
		return 0, fmt.Sprintf("the meta pages disagree on the page size (%d, %d)", m0.pageSize, m1.pageSize)
	}
	m := m0
	if m0.err != "" || (m1.err == "" && m1.txid > m0.txid) {
		used, m = 1, m1
	}
	ps := uint64(m.pageSize)
	if m.pgid < 2 || m.pgid > uint64(size)/ps {
		return used, fmt.Sprintf("meta %d's high-water mark is page %d (%d bytes) but the file holds %d bytes: truncated",
			used, m.pgid, m.pgid*ps, size)
	}
	if m.root < 2 || m.root >= m.pgid {
		return used, fmt.Sprintf("meta %d's root page %d lies outside the file's %d pages", used, m.root, m.pgid)
	}
	if m.freelist != pgidNoFreelist && (m.freelist < 2 || m.freelist >= m.pgid) {
		return used, fmt.Sprintf("meta %d's freelist page %d lies outside the file's %d pages", used, m.freelist, m.pgid)
	}
	return used, ""
}

// walkMeta walks the pages meta m (number i) reaches in f: its tree when tree is set, and its
// freelist. It reads the file through a read-only mapping of exactly its size (no copy): every
// page it touches lies below the high-water mark, which lies within the file, so no access can
// fall past the end; a file truncated meanwhile by someone else faults under guard.
func walkMeta(f *os.File, size int64, i int, m metaPage, tree bool) (problem string, err error) {
	raw, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return "", fmt.Errorf("map %s: %w", f.Name(), err)
	}
	defer func() { _ = syscall.Munmap(raw) }()
	restore := guard()
	defer restore()
	defer func() {
		if r := recover(); r != nil {
			problem, err = fmt.Sprintf("reading it faulted (%v)", r), nil
		}
	}()
	w := walker{raw: raw, ps: uint64(m.pageSize), hwm: m.pgid, seen: map[uint64]bool{}}
	if tree {
		if err := w.tree(m.root, 0); err != nil {
			if w.ioErr != nil {
				return "", w.ioErr
			}
			return fmt.Sprintf("meta %d's tree: %v", i, err), nil
		}
	}
	if m.freelist != pgidNoFreelist {
		if err := w.freelist(m.freelist); err != nil {
			if w.ioErr != nil {
				return "", w.ioErr
			}
			return fmt.Sprintf("meta %d's freelist: %v", i, err), nil
		}
	}
	return "", nil
}

// Page layout (bbolt internal/common): header id uint64, flags uint16, count uint16, overflow
// uint32; branch elements pos, ksize uint32 and pgid uint64; leaf elements flags, pos, ksize,
// vsize uint32; positions are relative to the element. A bucket's value is its root pgid and
// sequence, followed by an inline page when the root is 0.
const (
	flagBranch   = 0x01
	flagLeaf     = 0x02
	flagFreelist = 0x10
	flagBucket   = 0x01
	elemSize     = 16
	inBucketSize = 16
	maxDepth     = 64
)

// walker checks the B+tree on the file's bytes, as bbolt would read it, for what makes bbolt
// loop, fault or read out of the page: a page id outside the high-water mark, a page reached
// twice (a cycle), a page that does not carry its own id, an element outside its page.
type walker struct {
	raw   []byte // the file, mapped
	ps    uint64
	hwm   uint64
	seen  map[uint64]bool
	ioErr error // a read that failed: the system's fault, not the file's
}

// read returns n bytes at off (within the file: the high-water mark was checked against its size).
func (w *walker) read(off, n uint64) ([]byte, error) {
	if off+n > uint64(len(w.raw)) {
		return nil, fmt.Errorf("bytes %d..%d lie past the end of the file", off, off+n)
	}
	return w.raw[off : off+n], nil
}

// page returns page id's bytes (with its overflow pages) after checking its header.
func (w *walker) page(id uint64, want uint16) ([]byte, error) {
	if id < 2 || id >= w.hwm {
		return nil, fmt.Errorf("page %d is outside the %d pages in use", id, w.hwm)
	}
	if w.seen[id] {
		return nil, fmt.Errorf("page %d is reached twice", id)
	}
	w.seen[id] = true
	hdr, err := w.read(id*w.ps, w.ps)
	if err != nil {
		return nil, err
	}
	ne := binary.NativeEndian
	if got := ne.Uint64(hdr); got != id {
		return nil, fmt.Errorf("page %d carries id %d", id, got)
	}
	over := uint64(ne.Uint32(hdr[12:]))
	if id+over >= w.hwm {
		return nil, fmt.Errorf("page %d overflows past the %d pages in use", id, w.hwm)
	}
	if f := ne.Uint16(hdr[8:]); f&want == 0 {
		return nil, fmt.Errorf("page %d has flags %#x", id, f)
	}
	for i := id + 1; i <= id+over; i++ {
		w.seen[i] = true
	}
	if over == 0 {
		return hdr, nil
	}
	return w.read(id*w.ps, (over+1)*w.ps)
}

func (w *walker) tree(id uint64, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("deeper than %d pages", maxDepth)
	}
	p, err := w.page(id, flagBranch|flagLeaf)
	if err != nil {
		return err
	}
	return w.elements(p, id, depth)
}

// elements checks one branch or leaf page p (a file page or an inline bucket's page).
func (w *walker) elements(p []byte, id uint64, depth int) error {
	ne := binary.NativeEndian
	if len(p) < pageHeaderSize {
		return fmt.Errorf("page %d is short", id)
	}
	flags, count := ne.Uint16(p[8:]), int(ne.Uint16(p[10:]))
	if pageHeaderSize+count*elemSize > len(p) {
		return fmt.Errorf("page %d: %d elements do not fit", id, count)
	}
	for i := 0; i < count; i++ {
		off := pageHeaderSize + i*elemSize
		e := p[off : off+elemSize]
		switch {
		case flags&flagBranch != 0:
			pos, ksize := uint64(ne.Uint32(e[0:])), uint64(ne.Uint32(e[4:]))
			if uint64(off)+pos+ksize > uint64(len(p)) {
				return fmt.Errorf("page %d: element %d's key lies outside the page", id, i)
			}
			if err := w.tree(ne.Uint64(e[8:]), depth+1); err != nil {
				return err
			}
		case flags&flagLeaf != 0:
			fl, pos := ne.Uint32(e[0:]), uint64(ne.Uint32(e[4:]))
			ksize, vsize := uint64(ne.Uint32(e[8:])), uint64(ne.Uint32(e[12:]))
			end := uint64(off) + pos + ksize + vsize
			if end > uint64(len(p)) {
				return fmt.Errorf("page %d: element %d lies outside the page", id, i)
			}
			if fl&flagBucket == 0 {
				continue
			}
			v := p[uint64(off)+pos+ksize : end]
			if len(v) < inBucketSize {
				return fmt.Errorf("page %d: element %d is a bucket of %d bytes", id, i, len(v))
			}
			if root := ne.Uint64(v); root != 0 {
				if err := w.tree(root, depth+1); err != nil {
					return err
				}
			} else if err := w.elements(v[inBucketSize:], id, depth+1); err != nil {
				return err
			}
		default:
			return fmt.Errorf("page %d has flags %#x", id, flags)
		}
	}
	return nil
}

func (w *walker) freelist(id uint64) error {
	p, err := w.page(id, flagFreelist)
	if err != nil {
		return err
	}
	ne := binary.NativeEndian
	n, start := uint64(ne.Uint16(p[10:])), uint64(pageHeaderSize)
	if n == 0xFFFF {
		if len(p) < pageHeaderSize+8 {
			return fmt.Errorf("page %d is short", id)
		}
		n, start = ne.Uint64(p[pageHeaderSize:]), pageHeaderSize+8
	}
	if n > (uint64(len(p))-start)/8 {
		return fmt.Errorf("page %d: %d free ids do not fit", id, n)
	}
	for i := uint64(0); i < n; i++ {
		if f := ne.Uint64(p[start+i*8:]); f < 2 || f >= w.hwm {
			return fmt.Errorf("page %d: free page %d is outside the %d pages in use", id, f, w.hwm)
		}
	}
	return nil
}

// flockShared takes a shared flock on f within timeout (released when f is closed); past the
// timeout the error wraps ErrLocked.
func flockShared(f *os.File, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB)
		if err == nil {
			return nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return fmt.Errorf("lock %s: %w", f.Name(), err)
		}
		if time.Now().After(deadline) {
			return lockedAt(f.Name())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// guard turns a fault in the mapping (SIGSEGV/SIGBUS on a damaged page) into a panic on this
// goroutine, for the recover of the caller; it returns the function that restores the old
// setting. bbolt reads the mapping on the caller's goroutine, so this covers every read the
// store makes (bbolt's own Check runs on another goroutine: the store does not call it before
// readAll has touched every page it would).
func guard() func() {
	old := debug.SetPanicOnFault(true)
	return func() { debug.SetPanicOnFault(old) }
}

// readAll reads every key and value of every bucket, nested ones included: after it returned,
// every page reachable from the root was touched on this goroutine.
func readAll(btx *bolt.Tx) error {
	var walk func(b *bolt.Bucket, depth int) error
	walk = func(b *bolt.Bucket, depth int) error {
		if depth > 16 {
			return fmt.Errorf("buckets nested deeper than 16")
		}
		c := b.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			touch(k) // bbolt's Check reads every key; values are read later under guard
			if v == nil {
				if nb := b.Bucket(k); nb != nil {
					if err := walk(nb, depth+1); err != nil {
						return err
					}
				}
			}
		}
		return nil
	}
	return btx.ForEach(func(name []byte, b *bolt.Bucket) error {
		return walk(b, 0)
	})
}

// touch reads every byte of b (a slice into the mapping): a damaged element pointing outside
// the file faults here, under guard, rather than later in a decoder.
func touch(b []byte) {
	var x byte
	for _, c := range b {
		x ^= c
	}
	runtime.KeepAlive(x) // the reads happen
}
