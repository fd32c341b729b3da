package store

// Bolt keeps the state in one bbolt file, <state_dir>/state.db. Every value is JSON (counters
// and the version are decimal text), so `bbolt get` and `bbolt keys` show readable text.
// BE8 is an 8-byte big-endian unsigned integer, so keys sort in number order.
//
//	meta/
//	|--> version                -> "1"  (SchemaVersion)
//	|--> record                 -> Record JSON (the machine's current state)
//	|--> seq.journal            -> "1234" (last journal seq handed out; never reused)
//	|--> seq.outbox             -> "17"   (last outbox id handed out)
//	|--> seq.applied            -> "9"    (last applied-history key)
//	|--> moved_aside            -> MovedAside JSON (only in a file that replaced a corrupt one)
//	journal/
//	|--> <seq BE8>              -> Entry JSON
//	tick_entries/                  (index: the journal entries of each tick)
//	|--> <tick BE8><seq BE8>    -> "" (empty)
//	ticks/
//	|--> <tick BE8>             -> TickSummary JSON
//	leases/
//	|--> <unix nanos BE8>       -> LeaseEvent JSON (next free nanosecond on a tie)
//	outbox/
//	|--> <id BE8>               -> QueuedReport JSON
//	applied/
//	|--> <seq BE8>              -> Applied JSON (newest 100)
//
// Entries(tick) and DeleteTick seek tick_entries to <tick BE8> and read only that tick's keys,
// so neither scans the journal.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

const (
	fileMode = 0o600
	dirMode  = 0o700
	// defaultTimeout bounds the wait for another process's lock (status and explain wait no
	// longer; a tick waits TickWait).
	defaultTimeout = time.Second
	// compactMinBytes: a file smaller than this is never worth compacting.
	compactMinBytes = 128 << 10
	// reopenTries bounds the retries when the file was replaced (compacted) while we waited for it.
	reopenTries = 3
)

// BoltOptions tune OpenBolt.
type BoltOptions struct {
	// ReadOnly opens a copy for reading (explain --state-file): Update returns ErrReadOnly and a
	// damaged file is an error, never moved aside.
	ReadOnly bool
	// Timeout bounds the wait for the file lock (default ReaderWait; a tick's is TickWait); past
	// it the error is a *LockedError, which is ErrLocked.
	Timeout time.Duration
	// Logf receives the one line said when a damaged file is moved aside (default: dropped).
	Logf func(format string, args ...any)
	// MaxSize caps the file size in bytes (bbolt's MaxSize; 0: no cap).
	MaxSize int64
	// Now is the clock used to name a moved-aside file (default time.Now).
	Now func() time.Time
}

// Bolt is the Store over a bbolt file. It does not keep the file open: each Update, View,
// Check and CompactIfNeeded opens it, runs one transaction and closes it, so the lock is never
// held across a network or docker call.
type Bolt struct {
	path string
	opts BoltOptions
	// ready: the last check found the file whole and with its layout (nothing to initialise)
	ready bool
	// vouched: the file as this store last knew it sound (the check passed, the receipt
	// matched, or its own commit on such a file); nil when it does not know (receipt.go).
	// mu guards it: a Bolt may be shared by goroutines.
	mu      sync.Mutex
	vouched *receipt
	// fullChecks counts the opens that checked the whole file (the tests read it)
	fullChecks int
}

var _ Store = (*Bolt)(nil)

// OpenBolt validates (or creates) the state file at path and returns a Bolt for it. A file
// bbolt cannot read, or one with another schema version, is moved aside to
// <path>.corrupt-<UTC yyyymmddThhmmssZ> and a fresh file is created; in ReadOnly mode that is
// an error instead. A lock held past the timeout returns an error wrapping ErrLocked.
func OpenBolt(path string, opts BoltOptions) (*Bolt, error) {
	if opts.Timeout <= 0 {
		opts.Timeout = defaultTimeout
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	b := &Bolt{path: path, opts: opts}
	if opts.ReadOnly {
		if err := b.validateReadOnly(); err != nil {
			return nil, err
		}
		return b, nil
	}
	if err := os.MkdirAll(filepath.Dir(path), dirMode); err != nil {
		return nil, fmt.Errorf("create state dir: %w", err)
	}
	if err := b.validate(); err != nil {
		return nil, err
	}
	return b, nil
}

// Path is the state file's path.
func (b *Bolt) Path() string { return b.path }

// open opens the file and takes its lock (shared when readOnly). When the path was replaced by
// a compaction while waiting for the lock, it opens the new file instead.
func (b *Bolt) open(readOnly bool) (*bolt.DB, error) {
	for try := 0; ; try++ {
		db, f, err := boltOpen(b.path, b.opts, readOnly)
		if err != nil {
			if errors.Is(err, bolterrors.ErrTimeout) {
				return nil, lockedAt(b.path)
			}
			return nil, fmt.Errorf("open %s: %w", b.path, err)
		}
		if try >= reopenTries || f == nil || sameFile(f, b.path) {
			return db, nil
		}
		_ = db.Close()
	}
}

// boltOpen is bolt.Open that also returns the opened file, and turns a panic (bbolt panics on
// some damaged pages while loading the freelist) into an error, closing the file and its lock.
func boltOpen(path string, opts BoltOptions, readOnly bool) (db *bolt.DB, f *os.File, err error) {
	restore := guard()
	defer restore()
	defer func() {
		if r := recover(); r != nil {
			if f != nil {
				_ = f.Close()
			}
			db, f, err = nil, nil, fmt.Errorf("bbolt: %v", r)
		}
	}()
	db, err = bolt.Open(path, fileMode, &bolt.Options{
		Timeout:  opts.Timeout,
		ReadOnly: readOnly,
		MaxSize:  int(opts.MaxSize),
		OpenFile: func(name string, flag int, perm os.FileMode) (*os.File, error) {
			var err error
			// O_NONBLOCK: a FIFO put in the file's place since the check is not waited on
			f, err = os.OpenFile(name, flag|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, perm)
			return f, err
		},
	})
	return db, f, err
}

func sameFile(f *os.File, path string) bool {
	a, err := f.Stat()
	if err != nil {
		return true
	}
	c, err := os.Stat(path)
	if err != nil {
		return true
	}
	return os.SameFile(a, c)
}

// run runs one bbolt transaction on a freshly opened file and closes it. A panic from bbolt
// (a damaged page) comes back as an error so a tick ends instead of crashing; the next
// OpenBolt's check moves such a file aside.
func (b *Bolt) run(writable bool, fn func(*bolt.Tx) error) (err error) {
	restore := guard()
	defer restore()
	db, err := b.open(!writable)
	if err != nil {
		if damaged(err) {
			b.dropReceipt() // the next open checks the whole file and moves it aside
		}
		return err
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("state file %s is damaged: %v: %w", b.path, r, ErrCorrupt)
			b.dropReceipt() // the next open checks the whole file and moves it aside
		}
		if cerr := db.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("close %s: %w", b.path, cerr)
		}
	}()
	if writable {
		// under the commit's lock: the receipt is renewed only for a commit on the bytes it
		// vouched for
		base := b.stillVouched()
		if err := db.Update(fn); err != nil {
			return err
		}
		b.vouchAfterCommit(base)
		return nil
	}
	return db.View(fn)
}

// Update runs fn in one read-write transaction; an error from fn commits nothing.
func (b *Bolt) Update(fn func(Tx) error) error {
	if b.opts.ReadOnly {
		return ErrReadOnly
	}
	return b.run(true, func(btx *bolt.Tx) error {
		if err := ensureBuckets(btx); err != nil {
			return err
		}
		return fn(&tx{kv: boltTx{btx}})
	})
}

// View runs fn in one read-only transaction under a shared lock.
func (b *Bolt) View(fn func(Tx) error) error {
	return b.run(false, func(btx *bolt.Tx) error {
		return fn(&tx{kv: boltTx{btx}})
	})
}

func ensureBuckets(btx *bolt.Tx) error {
	for _, name := range allBuckets {
		if _, err := btx.CreateBucketIfNotExists([]byte(name)); err != nil {
			return fmt.Errorf("create bucket %s: %w", name, err)
		}
	}
	meta := btx.Bucket([]byte(bucketMeta))
	if meta.Get([]byte(keyVersion)) == nil {
		if err := meta.Put([]byte(keyVersion), []byte(strconv.Itoa(SchemaVersion))); err != nil {
			return fmt.Errorf("put meta/version: %w", err)
		}
	}
	return nil
}

// errUnchanged rolls back a transaction that found nothing to write: no commit, no fsync.
var errUnchanged = errors.New("nothing to write")

// initBuckets is ensureBuckets for a file that most often has them all already: then it writes
// nothing and returns errUnchanged, so opening a state file costs no commit (an fsync saved on
// every start of the agent, i.e. every tick of the timer).
func initBuckets(btx *bolt.Tx) error {
	if hasLayout(btx) {
		return errUnchanged
	}
	return ensureBuckets(btx)
}

// hasLayout reports whether the file has every bucket and its version: nothing to initialise.
func hasLayout(btx *bolt.Tx) bool {
	meta := btx.Bucket([]byte(bucketMeta))
	if meta == nil || meta.Get([]byte(keyVersion)) == nil {
		return false
	}
	for _, name := range allBuckets {
		if btx.Bucket([]byte(name)) == nil {
			return false
		}
	}
	return true
}

// schemaProblem says what is wrong with an open file's layout ("" when it is ours).
// An empty file (no bucket yet) is fine: it gets initialised.
func schemaProblem(btx *bolt.Tx) string {
	meta := btx.Bucket([]byte(bucketMeta))
	if meta == nil {
		empty := true
		_ = btx.ForEach(func([]byte, *bolt.Bucket) error { empty = false; return nil })
		if empty {
			return ""
		}
		return "no meta bucket: not a monky-deployd state file"
	}
	v := meta.Get([]byte(keyVersion))
	if v == nil {
		return "no meta/version: not a monky-deployd state file"
	}
	if string(v) != strconv.Itoa(SchemaVersion) {
		return fmt.Sprintf("schema version %q, this agent reads %d", truncate(string(v), 20), SchemaVersion)
	}
	// the record is every tick's first read: one that does not decode would fail every tick
	if rec := meta.Get([]byte(keyRecord)); rec != nil {
		var r Record
		if err := json.Unmarshal(rec, &r); err != nil {
			return fmt.Sprintf("meta/record does not decode (%v)", err)
		}
	}
	return ""
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// firstCheckError drains a bbolt check and returns its first problem.
func firstCheckError(btx *bolt.Tx) error {
	var first error
	for err := range btx.Check() {
		if first == nil {
			first = err
		}
	}
	return first
}

// inspect says what is wrong with the file: problem is a reason to move the file aside ("" when
// it is fine); err is an error that is not the file's fault (lock, permission). The bytes are
// checked before bbolt maps them (precheck), and the open and a read of every page run under
// guard, so a damaged page is a problem, never a crash.
func (b *Bolt) inspect(readOnly bool) (problem string, err error) {
	b.ready = false
	problem, exists, err := precheck(b.path, b.opts.Timeout, true)
	if err != nil || problem != "" {
		return problem, err
	}
	if !exists && readOnly {
		return "", fmt.Errorf("open %s: %w", b.path, os.ErrNotExist)
	}
	restore := guard()
	defer restore()
	db, err := b.open(readOnly)
	if err != nil {
		if !damaged(err) {
			return "", err
		}
		return fmt.Sprintf("bbolt cannot open it (%v)", unwrapAll(err)), nil
	}
	defer func() {
		if r := recover(); r != nil {
			problem = fmt.Sprintf("bbolt cannot read it (%v)", r)
		}
		_ = db.Close()
	}()
	verr := db.View(func(btx *bolt.Tx) error {
		if err := readAll(btx); err != nil {
			problem = fmt.Sprintf("bbolt cannot read it (%v)", err)
			return nil
		}
		if p := schemaProblem(btx); p != "" {
			problem = p
			return nil
		}
		if cerr := firstCheckError(btx); cerr != nil {
			problem = fmt.Sprintf("consistency check failed (%v)", cerr)
			return nil
		}
		b.ready = !readOnly && hasLayout(btx)
		return nil
	})
	if verr != nil && problem == "" {
		problem = fmt.Sprintf("bbolt cannot read it (%v)", verr)
	}
	if problem == "" && !readOnly {
		// the bytes the check passed, hashed under the same lock for the receipt (receipt.go);
		// a read-only store never writes one
		if size, crc, err := sumPath(b.path); err == nil {
			b.setVouched(&receipt{Size: size, CRC32: crc, CheckedAt: b.opts.Now().UTC()})
		}
	}
	return problem, nil
}

// damaged reports whether an open error is the file's content (not a bolt file, a bad
// checksum, too short) rather than the system's (lock, permission, disk full, I/O): only the
// former is a reason to move the file aside.
func damaged(err error) bool {
	var errno syscall.Errno
	var perr *fs.PathError
	switch {
	case errors.Is(err, ErrLocked), errors.Is(err, bolterrors.ErrMaxSizeReached),
		errors.As(err, &errno), errors.As(err, &perr):
		return false
	}
	return true
}

// unwrapAll returns the innermost error (bbolt's own words, without our path prefix).
func unwrapAll(err error) error {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err
		}
		err = next
	}
}

func (b *Bolt) validate() error {
	r, err := b.matchReceipt()
	if err != nil {
		return err
	}
	if r != nil {
		b.setVouched(r)
		b.ready = true
		return b.fixMode()
	}
	b.fullChecks++
	_, statErr := os.Stat(b.path)
	created := errors.Is(statErr, fs.ErrNotExist)
	problem, err := b.inspect(false)
	if err != nil {
		return err
	}
	var moved []byte
	if problem != "" {
		aside, err := b.moveAside()
		if err != nil {
			return fmt.Errorf("state file %s is unusable (%s) and could not be moved aside: %w", b.path, problem, err)
		}
		b.opts.Logf("state file %s is unusable: %s; moved it aside to %s; the agent starts fresh", b.path, problem, aside)
		created = true
		moved, _ = json.Marshal(MovedAside{Path: aside, Problem: problem, At: b.opts.Now().UTC()})
	}
	// a file the check found whole and with its layout is not opened again: nothing to write
	if moved != nil || !b.ready {
		if err := b.run(true, func(btx *bolt.Tx) error {
			if moved == nil {
				return initBuckets(btx)
			}
			if err := ensureBuckets(btx); err != nil {
				return err
			}
			return btx.Bucket([]byte(bucketMeta)).Put([]byte(keyMovedAside), moved)
		}); errors.Is(err, errUnchanged) {
			b.writeFirstReceipt() // nothing committed: the checked bytes are the file's
		} else if err != nil {
			return fmt.Errorf("initialise state file: %w", err)
		}
	} else {
		b.writeFirstReceipt()
	}
	if created {
		if err := syncDir(filepath.Dir(b.path)); err != nil {
			return err
		}
	}
	return b.fixMode()
}

// fixMode gives the state file its mode back (0600) when something changed it.
func (b *Bolt) fixMode() error {
	if fi, err := os.Stat(b.path); err == nil && fi.Mode().Perm() != fileMode {
		if err := os.Chmod(b.path, fileMode); err != nil {
			return fmt.Errorf("chmod state file: %w", err)
		}
	}
	return nil
}

func (b *Bolt) validateReadOnly() error {
	r, err := b.matchReceipt()
	if err != nil {
		return err
	}
	if r != nil {
		return nil
	}
	b.fullChecks++
	problem, err := b.inspect(true)
	if err != nil {
		return err
	}
	if problem != "" {
		return &CorruptError{Path: b.path, Problem: problem}
	}
	return nil
}

// keyMovedAside (meta/moved_aside) remembers, in the fresh file, the corrupt one it replaced.
const keyMovedAside = "moved_aside"

// MovedAside is the corrupt state file a fresh one replaced: where the copy is, and why.
type MovedAside struct {
	Path    string    `json:"path"`
	Problem string    `json:"problem"`
	At      time.Time `json:"at"`
}

// MovedAside returns the corrupt file this one replaced, nil when it replaced none.
func (b *Bolt) MovedAside() (*MovedAside, error) {
	var m *MovedAside
	err := b.run(false, func(btx *bolt.Tx) error {
		meta := btx.Bucket([]byte(bucketMeta))
		if meta == nil {
			return nil
		}
		if v := meta.Get([]byte(keyMovedAside)); v != nil {
			m = &MovedAside{}
			return json.Unmarshal(v, m)
		}
		return nil
	})
	return m, err
}

// CorruptError is a state file that cannot be used as it is. Aside names the copy when the
// file was moved aside.
type CorruptError struct {
	Path    string
	Problem string
	Aside   string
}

func (e *CorruptError) Error() string {
	s := fmt.Sprintf("state file %s is corrupt: %s", e.Path, e.Problem)
	if e.Aside != "" {
		s += "; moved aside to " + e.Aside
	}
	return s
}

func (e *CorruptError) Unwrap() error { return ErrCorrupt }

// moveAside renames the file to <path>.corrupt-<UTC stamp> (with -N on a clash) and returns
// the new name.
func (b *Bolt) moveAside() (string, error) {
	base := b.path + ".corrupt-" + b.opts.Now().UTC().Format("20060102T150405Z")
	aside := base
	for i := 1; ; i++ {
		if _, err := os.Lstat(aside); errors.Is(err, fs.ErrNotExist) {
			break
		}
		aside = fmt.Sprintf("%s-%d", base, i)
	}
	if err := os.Rename(b.path, aside); err != nil {
		return "", fmt.Errorf("move aside: %w", err)
	}
	b.dropReceipt()
	if err := syncDir(filepath.Dir(b.path)); err != nil {
		return "", err
	}
	return aside, nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync dir: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync dir: %w", err)
	}
	return nil
}

// Check runs bbolt's consistency check and returns its first problem.
func (b *Bolt) Check() error {
	return b.run(false, func(btx *bolt.Tx) error {
		if err := firstCheckError(btx); err != nil {
			return fmt.Errorf("check %s: %w", b.path, err)
		}
		return nil
	})
}

// CompactIfNeeded rewrites the file without its free pages when they exceed threshold (a
// fraction of the data size, e.g. 0.5). The copy is written to <path>.compact, synced and renamed
// over the file, and the directory is synced; it reports whether it compacted. Files under
// 128 KiB are left alone.
func (b *Bolt) CompactIfNeeded(threshold float64) (compacted bool, err error) {
	if b.opts.ReadOnly {
		return false, ErrReadOnly
	}
	src, err := b.open(false)
	if err != nil {
		return false, err
	}
	defer func() {
		if cerr := src.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("close %s: %w", b.path, cerr)
		}
	}()
	var size int64 // up to the high-water mark; bbolt may have grown the file beyond it
	if err := src.View(func(btx *bolt.Tx) error { size = btx.Size(); return nil }); err != nil {
		return false, fmt.Errorf("compact: %w", err)
	}
	if size < compactMinBytes {
		return false, nil
	}
	st := src.Stats()
	free := int64(st.FreePageN+st.PendingPageN) * int64(src.Info().PageSize)
	if float64(free) <= threshold*float64(size) {
		return false, nil
	}

	tmp := b.path + ".compact"
	if err := os.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("compact: %w", err)
	}
	dst, err := bolt.Open(tmp, fileMode, &bolt.Options{Timeout: b.opts.Timeout})
	if err != nil {
		return false, fmt.Errorf("compact: open copy: %w", err)
	}
	if err := bolt.Compact(dst, src, 1<<20); err != nil {
		_ = dst.Close()
		_ = os.Remove(tmp)
		return false, fmt.Errorf("compact: %w", err)
	}
	if err := dst.Sync(); err != nil {
		_ = dst.Close()
		_ = os.Remove(tmp)
		return false, fmt.Errorf("compact: sync copy: %w", err)
	}
	if err := dst.Close(); err != nil {
		_ = os.Remove(tmp)
		return false, fmt.Errorf("compact: close copy: %w", err)
	}
	if err := os.Rename(tmp, b.path); err != nil {
		_ = os.Remove(tmp)
		return false, fmt.Errorf("compact: rename: %w", err)
	}
	b.dropReceipt() // new bytes: the next open checks them
	if err := syncDir(filepath.Dir(b.path)); err != nil {
		return true, fmt.Errorf("compact: %w", err)
	}
	return true, nil
}

// boltTx adapts a bbolt transaction to kvTx.
type boltTx struct{ btx *bolt.Tx }

func (t boltTx) bucket(name string) kvBucket {
	return boltBucket{b: t.btx.Bucket([]byte(name))}
}

// boltBucket is a bbolt bucket; a nil b is a bucket missing from the file (reads as empty).
type boltBucket struct{ b *bolt.Bucket }

func (b boltBucket) get(k []byte) []byte {
	if b.b == nil {
		return nil
	}
	return b.b.Get(k)
}

func (b boltBucket) put(k, v []byte) error {
	if b.b == nil || !b.b.Writable() {
		return errNotWritable
	}
	return b.b.Put(k, v)
}

func (b boltBucket) del(k []byte) error {
	if b.b == nil || !b.b.Writable() {
		return errNotWritable
	}
	return b.b.Delete(k)
}

func (b boltBucket) ascend(from []byte, fn func(k, v []byte) (bool, error)) error {
	if b.b == nil {
		return nil
	}
	c := b.b.Cursor()
	var k, v []byte
	if from == nil {
		k, v = c.First()
	} else {
		k, v = c.Seek(from)
	}
	for ; k != nil; k, v = c.Next() {
		more, err := fn(k, v)
		if err != nil || !more {
			return err
		}
	}
	return nil
}

func (b boltBucket) descend(fn func(k, v []byte) (bool, error)) error {
	if b.b == nil {
		return nil
	}
	c := b.b.Cursor()
	for k, v := c.Last(); k != nil; k, v = c.Prev() {
		more, err := fn(k, v)
		if err != nil || !more {
			return err
		}
	}
	return nil
}
