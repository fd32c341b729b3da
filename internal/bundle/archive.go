package bundle

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"errors"
	"io"
	"maps"
	"slices"
)

// What a read bundle holds in memory (docs/SECURITY.md, "What the agent itself holds of a
// bundle"): a file of
// at most MaxComposeBytes while the files held stay within heldBudget; every other file stays
// in the archive, its size and sha256 kept, and is streamed from there when it is written (Each).
// The files the agent reads whole (MetaFile, TemplateFile, ManifestFile and the compose file)
// are brought into memory after the read when the budget left them in the archive, each bounded
// by heldFileMax. A bundle of 64 MiB of assets therefore costs the agent heldBudget, not 64 MiB.
const (
	heldBudget  = 8 << 20
	heldFileMax = 8 << 20
)

// streamed is a file left in the archive: its size and sha256, checked again when it is read.
type streamed struct {
	size int64
	sum  [sha256.Size]byte
}

// errArchiveChanged says that a pass over the archive read bytes the first pass did not: the
// file under the bundle changed while the agent used it.
var errArchiveChanged = errors.New("the bundle's archive changed while the agent read it")

// Names lists every regular file of the bundle (bundle.json included), sorted.
func (b *Bundle) Names() []string {
	names := slices.Collect(maps.Keys(b.Files))
	for n := range b.streamed {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Has reports whether the bundle holds a regular file name.
func (b *Bundle) Has(name string) bool {
	if _, ok := b.Files[name]; ok {
		return true
	}
	_, ok := b.streamed[name]
	return ok
}

// Size is the size of the file name (0 when there is none).
func (b *Bundle) Size(name string) int64 {
	if data, ok := b.Files[name]; ok {
		return int64(len(data))
	}
	return b.streamed[name].size
}

// Count is how many regular files the bundle holds.
func (b *Bundle) Count() int { return len(b.Files) + len(b.streamed) }

// Held is how many bytes of file content the bundle holds in memory.
func (b *Bundle) Held() int64 {
	var n int64
	for _, data := range b.Files {
		n += int64(len(data))
	}
	return n
}

// Each hands fn every file of the bundle with its size and content, those held in memory first,
// then those left in the archive in one pass over it, each checked against the sha256 the read
// computed (a file changed under the agent is an error, after fn read it: the caller writes to
// a place it discards on error). fn need not read r to its end.
func (b *Bundle) Each(fn func(name string, size int64, r io.Reader) error) error {
	for _, n := range slices.Sorted(maps.Keys(b.Files)) {
		if err := fn(n, int64(len(b.Files[n])), bytes.NewReader(b.Files[n])); err != nil {
			return err
		}
	}
	if len(b.streamed) == 0 {
		return nil
	}
	left := len(b.streamed)
	return b.pass(func(name string, size int64, r io.Reader) (bool, error) {
		want, ok := b.streamed[name]
		if !ok {
			return false, nil
		}
		if size != want.size {
			return false, errArchiveChanged
		}
		h := sha256.New()
		if err := fn(name, size, io.TeeReader(r, h)); err != nil {
			return false, err
		}
		if _, err := io.Copy(h, r); err != nil {
			return false, err
		}
		if [sha256.Size]byte(h.Sum(nil)) != want.sum {
			return false, errArchiveChanged
		}
		left--
		return left == 0, nil
	})
}

// hold brings the named files left in the archive into memory, each at most max bytes (larger is
// a *Refusal), in one pass.
func (b *Bundle) hold(max int64, names ...string) error {
	want := map[string]streamed{}
	for _, n := range names {
		s, ok := b.streamed[n]
		if !ok {
			continue
		}
		if s.size > max {
			return Invalid("%s is %d bytes: the agent reads at most %d bytes of it", QuoteName(n), s.size, max)
		}
		want[n] = s
	}
	if len(want) == 0 {
		return nil
	}
	return b.pass(func(name string, size int64, r io.Reader) (bool, error) {
		s, ok := want[name]
		if !ok {
			return false, nil
		}
		if size != s.size {
			return false, errArchiveChanged
		}
		buf := make([]byte, size)
		if _, err := io.ReadFull(r, buf); err != nil {
			return false, err
		}
		if sha256.Sum256(buf) != s.sum {
			return false, errArchiveChanged
		}
		b.Files[name] = buf
		delete(b.streamed, name)
		delete(want, name)
		return len(want) == 0, nil
	})
}

// pass reads the bundle's archive again from its start and hands fn each regular file, until fn
// says it is done. The archive was checked whole by the read: anything it no longer reads as is
// errArchiveChanged.
func (b *Bundle) pass(fn func(name string, size int64, r io.Reader) (done bool, err error)) error {
	if b.src == nil {
		return errors.New("the bundle's files left in an archive that is not kept")
	}
	src, _, err := openStream(io.NewSectionReader(b.src, 0, b.srcSize))
	if err != nil {
		return errArchiveChanged
	}
	tr := tar.NewReader(&countingReader{r: src, limit: b.streamBytes})
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return errArchiveChanged // a file the read saw is gone
		}
		if err != nil && !errors.Is(err, tar.ErrInsecurePath) {
			return errArchiveChanged
		}
		if hdr.Typeflag != tar.TypeReg {
			continue
		}
		done, err := fn(hdr.Name, hdr.Size, tr)
		if err != nil || done {
			return err
		}
	}
}

// openStream is the archive's tar stream: gunzipped when it starts with gzip's magic bytes.
func openStream(r io.Reader) (src io.Reader, gz bool, err error) {
	br := bufio.NewReaderSize(r, 32<<10)
	magic, _ := br.Peek(2)
	if len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, true, err
		}
		zr.Multistream(false)
		return bufio.NewReaderSize(zr, 32<<10), true, nil
	}
	return br, false, nil
}
