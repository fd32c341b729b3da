package store

import (
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The check's receipt: a file the check passed, or that this store's own commit wrote on top of
// such a file, is not checked again on every open.
//
// OpenBolt checks the whole file before it trusts it (precheck's walk, bbolt's open, every key,
// bbolt's Check), so a damaged file is moved aside instead of crashing the agent. On a year's
// file that is about 3 ms and 4 MiB of mapped pages on every tick. The receipt,
// <path>.checked, holds the size and CRC-32 of the file as the check left it or as a commit
// of this store left it, and when the check last ran. An open whose file hashes to its
// receipt skips the check: its bytes are exactly ones the check passed or bbolt's commit wrote
// from them. Any other byte — a bit flipped, a truncation, a torn commit, a writer that is not
// this store, a copy — changes the hash, and the check runs. So does a receipt older than
// receiptMaxAge: a fault bbolt itself might write is found within the hour.
//
// A commit renews the receipt only when the file still hashed to it just before the commit,
// under the commit's lock; the receipt is written without fsync (a lost or torn receipt costs
// one check, never trust). A read or commit that finds a damaged page removes it.

// ReceiptSuffix names the receipt beside the state file.
const ReceiptSuffix = ".checked"

// receiptMaxAge is how long a receipt stands in for the check after the check last ran.
const receiptMaxAge = time.Hour

// receipt is the file as the check, or a commit on a checked file, left it. On disk it is one
// line of text (no reflection to decode on every tick's open):
//
//	monky-deployd-receipt 2 <size> <crc32, 8 hex digits> <checked at, RFC 3339 UTC>
//
// The sum is CRC-32 (IEEE), not CRC-32C, which version 1 held: Go builds CRC-32C's tables for
// its SSE 4.2 code on first use, about 0.15 ms and 5 million instructions on every process's
// first sum — more than the rest of a heartbeat's store work; CRC-32 (PCLMULQDQ) starts in
// 0.02 ms. A version 1 receipt does not decode: that open checks the whole file, once.
type receipt struct {
	Size      int64
	CRC32     uint32
	CheckedAt time.Time // when the whole check last ran on this file's lineage
}

const receiptMagic = "monky-deployd-receipt 2"

func (r receipt) encode() []byte {
	return fmt.Appendf(nil, "%s %d %08x %s\n", receiptMagic, r.Size, r.CRC32, r.CheckedAt.UTC().Format(time.RFC3339Nano))
}

func decodeReceipt(raw []byte) *receipt {
	f := strings.Fields(string(raw))
	if len(f) != 5 || strings.Join(f[:2], " ") != receiptMagic {
		return nil
	}
	size, err1 := strconv.ParseInt(f[2], 10, 64)
	crc, err2 := strconv.ParseUint(f[3], 16, 32)
	at, err3 := time.Parse(time.RFC3339Nano, f[4])
	if err1 != nil || err2 != nil || err3 != nil || size <= 0 || len(f[3]) != 8 {
		return nil
	}
	return &receipt{Size: size, CRC32: uint32(crc), CheckedAt: at}
}

// sumBuf is the read buffer of sumOf, made once and kept: a tick hashes the file up to three
// times. (A sync.Pool made a second one whenever the tick's goroutine came back on another P:
// 64 KiB more heap, 16 more pages faulted in.)
var sumBuf struct {
	sync.Mutex
	b []byte
}

// sumOf hashes f from its start. It reads through a small buffer: the file is not mapped, so
// its pages do not count in the process's memory.
func sumOf(f *os.File) (size int64, crc uint32, err error) {
	h := crc32.NewIEEE()
	sumBuf.Lock()
	defer sumBuf.Unlock()
	if sumBuf.b == nil {
		sumBuf.b = make([]byte, 64<<10)
	}
	n, err := io.CopyBuffer(h, io.NewSectionReader(f, 0, 1<<62), sumBuf.b)
	if err != nil {
		return 0, 0, err
	}
	return n, h.Sum32(), nil
}

// sumPath hashes the file at path (no symlink followed) without taking its lock: the caller
// holds it.
func sumPath(path string) (size int64, crc uint32, err error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	return sumOf(f)
}

func (b *Bolt) receiptPath() string { return b.path + ReceiptSuffix }

// readReceipt returns the receipt beside the file, nil when there is none it can trust: not a
// regular file of this user's that no one else may write, or one that does not decode.
func (b *Bolt) readReceipt() *receipt {
	f, err := os.OpenFile(b.receiptPath(), os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o022 != 0 || fi.Size() > 4096 {
		return nil
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !ok || int(st.Uid) != os.Geteuid() {
		return nil
	}
	raw, err := io.ReadAll(f)
	if err != nil {
		return nil
	}
	return decodeReceipt(raw)
}

// current reports whether r still stands in for the check at now.
func (r *receipt) current(now time.Time) bool {
	age := now.Sub(r.CheckedAt)
	return age < receiptMaxAge && age > -5*time.Minute
}

// matchReceipt returns the receipt when the file hashes to it and it is current, nil
// otherwise. It hashes under a shared lock, so no commit is half-written while it reads.
func (b *Bolt) matchReceipt() (*receipt, error) {
	r := b.readReceipt()
	if r == nil || !r.current(b.opts.Now()) {
		return nil, nil
	}
	f, err := os.OpenFile(b.path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ELOOP) {
			return nil, nil // the check says what is wrong
		}
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() || fi.Size() != r.Size {
		return nil, nil
	}
	if err := flockShared(f, b.opts.Timeout); err != nil {
		return nil, err
	}
	size, crc, err := sumOf(f)
	if err != nil {
		return nil, nil // the check reads it again and says what is wrong
	}
	if size != r.Size || crc != r.CRC32 {
		return nil, nil
	}
	// the meta pages and the freelist, which bbolt's read-write open reads, checked as before
	// (two reads and a page or so): a fault there would leave bbolt's mapping, and its lock,
	// behind when it panics
	if problem, err := checkBytes(f, size, false); err != nil || problem != "" {
		return nil, nil // the whole check says what is wrong
	}
	return r, nil
}

// writeReceipt replaces the receipt with r: a temp file renamed over it, no fsync. A failure
// removes the old receipt, which no longer describes the file.
func (b *Bolt) writeReceipt(r receipt) {
	tmp := b.receiptPath() + ".tmp"
	err := os.WriteFile(tmp, r.encode(), fileMode)
	if err == nil {
		if err = os.Rename(tmp, b.receiptPath()); err != nil {
			_ = os.Remove(tmp)
		}
	}
	if err != nil {
		b.dropReceipt()
	}
}

func (b *Bolt) getVouched() *receipt {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.vouched
}

func (b *Bolt) setVouched(r *receipt) {
	b.mu.Lock()
	b.vouched = r
	b.mu.Unlock()
}

// dropReceipt forgets the receipt: the next open checks the whole file. A read-only store
// (status, explain, a support copy) writes nothing: it leaves the file for run's next open.
func (b *Bolt) dropReceipt() {
	b.setVouched(nil)
	if b.opts.ReadOnly {
		return
	}
	if err := os.Remove(b.receiptPath()); err != nil && !errors.Is(err, fs.ErrNotExist) {
		b.opts.Logf("state file receipt %s: %v", b.receiptPath(), err)
	}
}

// writeFirstReceipt writes the receipt for the bytes the check just passed.
func (b *Bolt) writeFirstReceipt() {
	if v := b.getVouched(); v != nil {
		b.writeReceipt(*v)
	}
}

// vouchAfterCommit renews the receipt after a commit when the file hashed to it before.
func (b *Bolt) vouchAfterCommit(base bool) {
	v := b.getVouched()
	if !base || v == nil {
		b.dropReceipt()
		return
	}
	size, crc, err := sumPath(b.path)
	if err != nil {
		b.dropReceipt()
		return
	}
	r := receipt{Size: size, CRC32: crc, CheckedAt: v.CheckedAt}
	b.setVouched(&r)
	b.writeReceipt(r)
}

// stillVouched reports whether the file, under the caller's lock, still hashes to the receipt
// this store holds.
func (b *Bolt) stillVouched() bool {
	v := b.getVouched()
	if v == nil {
		return false
	}
	size, crc, err := sumPath(b.path)
	return err == nil && size == v.Size && crc == v.CRC32
}
