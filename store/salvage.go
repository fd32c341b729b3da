package store

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	bolt "go.etcd.io/bbolt"
)

// Salvaged says how a corrupt copy was read (Salvage).
type Salvaged struct {
	// Problem is why the file is corrupt, as the check found it.
	Problem string `json:"problem"`
	// Meta is the meta page the copy was read through (0 or 1), TxID its commit, and Newest
	// the newest commit a valid meta page names: Newest > TxID means the commits after TxID
	// are lost to this reading.
	Meta   int    `json:"meta"`
	TxID   uint64 `json:"txid"`
	Newest uint64 `json:"newest_txid"`
	// Whole: every page the chosen meta reaches reads; else only what lies on sound pages does
	// (Lost says what failed).
	Whole bool   `json:"whole"`
	Lost  string `json:"lost,omitempty"`
}

// Older reports whether the copy was read through an older meta page than the newest.
func (s Salvaged) Older() bool { return s.TxID < s.Newest }

// Salvage reads what it can of a corrupt state file without changing it: it copies the bytes
// into dir, zero-fills a truncated copy up to what its meta page names (so no read faults past
// the end), and opens it through the first meta page — the newest valid one, then the older
// (bbolt keeps two) — whose tree reads whole, else through the first whose record reads. The
// Store it returns is read-only in effect (a copy in dir); every read of a damaged page comes
// back as an error, never a panic. err when neither meta page yields the record.
func Salvage(path, dir string) (*Bolt, Salvaged, error) {
	s := Salvaged{}
	f, err := os.Open(path)
	if err != nil {
		return nil, s, err
	}
	fi, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, s, err
	}
	size := fi.Size()
	if size < 2*minPageSize {
		_ = f.Close()
		return nil, s, fmt.Errorf("%s holds %d bytes: no meta page to read", path, size)
	}
	m0, m1, err := readMetas(f)
	_ = f.Close()
	if err != nil {
		return nil, s, err
	}
	if problem, _, err := precheck(path, defaultTimeout, true); err == nil {
		s.Problem = problem
	}
	metas := []metaPage{m0, m1}
	order := []int{0, 1}
	if m1.err == "" && (m0.err != "" || m1.txid > m0.txid) {
		order = []int{1, 0}
	}
	for _, i := range order {
		if metas[i].err == "" && metas[i].txid > s.Newest {
			s.Newest = metas[i].txid
		}
	}
	var fallback *Bolt
	var fallbackS Salvaged
	var forged []string
	for _, i := range order {
		m := metas[i]
		if m.err != "" {
			continue
		}
		if pad := int64(m.pgid)*int64(m.pageSize) - size; pad > maxSalvagePad {
			forged = append(forged, fmt.Sprintf("meta %d's high-water mark is page %d, %d bytes past the copy's end (at most %d are read as lost)", i, m.pgid, pad, maxSalvagePad))
			continue
		}
		p := filepath.Join(dir, fmt.Sprintf("salvage-meta%d.db", i))
		if err := writeThrough(p, path, i, m); err != nil {
			return nil, s, err
		}
		b := &Bolt{path: p, opts: BoltOptions{ReadOnly: true, Timeout: defaultTimeout, Logf: func(string, ...any) {}}}
		try := s
		try.Meta, try.TxID = i, m.txid
		whole := b.run(false, readAll)
		if whole == nil {
			try.Whole = true
			return b, try, nil
		}
		try.Lost = whole.Error()
		if fallback == nil && b.run(false, func(btx *bolt.Tx) error {
			if meta := btx.Bucket([]byte(bucketMeta)); meta == nil || meta.Get([]byte(keyRecord)) == nil {
				return errors.New("no record")
			}
			return nil
		}) == nil {
			fallback, fallbackS = b, try
		}
	}
	if fallback != nil {
		return fallback, fallbackS, nil
	}
	if len(forged) > 0 {
		return nil, s, fmt.Errorf("neither meta page of %s leads to a readable record: %s", path, strings.Join(forged, "; "))
	}
	return nil, s, fmt.Errorf("neither meta page of %s leads to a readable record", path)
}

// maxSalvagePad is how far past a copy's end Salvage reads a meta page's high-water mark as
// pages lost to a truncation (read as zeros, so no read faults): a mark further out is a page
// count no truncated copy explains, and the meta page is not read through (a 64 KiB copy whose
// forged meta names a gigabyte would otherwise cost that much to open).
const maxSalvagePad = 16 << 20

// writeThrough copies the file at src to p so that bbolt opens it through meta page i (m): the
// other meta page's magic is cleared, and a file shorter than m's high-water mark is extended to
// it with a hole (zeros that cost neither memory nor disk). The bytes are streamed, never held.
func writeThrough(p, src string, i int, m metaPage) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	n, err := io.Copy(out, in)
	ps := int64(m.pageSize)
	if need := int64(m.pgid) * ps; err == nil && need > n {
		err = out.Truncate(need)
		n = need
	}
	if other := int64(1-i) * ps; err == nil && other+pageHeaderSize+4 <= n {
		var zero [4]byte
		_, err = out.WriteAt(zero[:], other+pageHeaderSize)
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}
