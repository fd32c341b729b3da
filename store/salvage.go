package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"

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
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, s, err
	}
	if len(raw) < 2*minPageSize {
		return nil, s, fmt.Errorf("%s holds %d bytes: no meta page to read", path, len(raw))
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, s, err
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
	for _, i := range order {
		m := metas[i]
		if m.err != "" {
			continue
		}
		p := filepath.Join(dir, fmt.Sprintf("salvage-meta%d.db", i))
		if err := writeThrough(p, raw, i, m); err != nil {
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
	return nil, s, fmt.Errorf("neither meta page of %s leads to a readable record", path)
}

// writeThrough writes raw to p so that bbolt opens it through meta page i (m): the other meta
// page's magic is cleared, and a file shorter than m's high-water mark is zero-filled up to it.
func writeThrough(p string, raw []byte, i int, m metaPage) error {
	b := append([]byte(nil), raw...)
	ps := int(m.pageSize)
	if need := int(m.pgid) * ps; need > len(b) && need <= 1<<30 {
		b = append(b, make([]byte, need-len(b))...)
	}
	other := (1 - i) * ps
	if other+pageHeaderSize+4 <= len(b) {
		binary.NativeEndian.PutUint32(b[other+pageHeaderSize:], 0)
	}
	return os.WriteFile(p, b, 0o600)
}
