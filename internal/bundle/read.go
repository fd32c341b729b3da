package bundle

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"
)

// Archive limits fixed by PROTOCOL.md §2.
const (
	// MaxEntries is the most entries (files and directories) a bundle may hold.
	MaxEntries = 10000
	// DefaultMaxBytes is max_bundle_bytes when the config does not set it.
	DefaultMaxBytes = 64 << 20
	// MetaFile is the bundle's metadata file.
	MetaFile = "bundle.json"
	// DefaultComposeFile is bundle.json's compose_file when absent.
	DefaultComposeFile = "compose.yaml"
	// TemplateFile is the optional env template.
	TemplateFile = ".env.template"
	// EnvFile is what the agent writes into a release from TemplateFile; a bundle never
	// carries it.
	EnvFile = ".env"
	// ManifestFile is the optional secrets manifest.
	ManifestFile = "secrets.manifest.json"
	// MaxComposeBytes is the largest file compose is handed (internal/model's bound for a
	// compose, included or extended file): the reader holds every file within it in memory
	// while its budget lasts (archive.go).
	MaxComposeBytes = 1 << 20
)

// Agent is bundle.json's agent profile; every flag defaults to false.
type Agent struct {
	AllowPrivileged bool `json:"allow_privileged"`
	AllowRollback   bool `json:"allow_rollback"`
	// RevertOnFailure (PROTOCOL.md §2, 2026-12-04): the release may be left for the one last
	// healthy on the box when its apply fails.
	RevertOnFailure bool `json:"revert_on_failure"`
}

// Meta is bundle.json as the agent reads it; unknown keys are ignored.
type Meta struct {
	EnvID         string   `json:"env_id"`
	ComposeFile   string   `json:"compose_file"`
	DiskNeedBytes int64    `json:"disk_need_bytes"`
	Agent         Agent    `json:"agent"`
	Files         []string `json:"files"`
}

// Bundle is a read, structurally valid bundle. Nothing of it has been written anywhere.
type Bundle struct {
	// Files holds the regular files held in memory by their clean relative paths: every file
	// of a small bundle, and always bundle.json, .env.template, secrets.manifest.json and the
	// compose file when the bundle has them. A large bundle leaves the rest in its archive
	// (archive.go): Names, Has, Size and Each see every file.
	Files map[string][]byte
	// Dirs lists the directory entries of the archive (clean, no trailing slash), sorted.
	Dirs []string
	Meta Meta
	// Sha is tenancy's bundle sha of every file (see Sha).
	Sha string

	streamed    map[string]streamed // the files left in the archive
	src         io.ReaderAt         // the archive, read again for them
	srcSize     int64
	streamBytes int64 // the uncompressed stream's length, the bound of a pass over it
}

// countingReader counts what it passes and refuses to pass more than limit bytes.
type countingReader struct {
	r     io.Reader
	n     int64
	limit int64
}

var errStreamCap = errors.New("uncompressed stream over the cap")

func (c *countingReader) Read(p []byte) (int, error) {
	if c.n >= c.limit {
		return 0, errStreamCap
	}
	if rem := c.limit - c.n; int64(len(p)) > rem {
		p = p[:rem]
	}
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// Read parses a bundle archive: a POSIX tar, gzip-compressed or not (recognised by its magic
// bytes). Everything that makes the archive unsafe to unpack is refused from the headers,
// before any file's content counts and before the sha is computed, as a *Refusal with code
// BUNDLE_INVALID: an entry other than a regular file or a directory, a name that is absolute,
// holds a `..` segment or is not clean, a name twice, more than MaxEntries entries, more than
// maxBytes of file content, setuid/setgid/sticky bits, a truncated stream. Read holds no more
// file content in memory than heldBudget and the four files it reads whole, each within its
// bound (archive.go). maxBytes ≤ 0 means DefaultMaxBytes.
func Read(archive []byte, maxBytes int64) (*Bundle, error) {
	return ReadFrom(bytes.NewReader(archive), int64(len(archive)), maxBytes)
}

// ReadFrom is Read of the size bytes of src, an archive the bundle reads again for the files it
// leaves there: src must stay open and unchanged while the bundle is used.
func ReadFrom(src io.ReaderAt, size, maxBytes int64) (*Bundle, error) {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	stream, gz, err := openStream(io.NewSectionReader(src, 0, size))
	if err != nil {
		return nil, Invalid("gzip stream unreadable")
	}
	// The whole uncompressed stream is capped too: the file content read so far plus a
	// header and padding per entry seen, plus room for PAX records and the end blocks. A gzip
	// bomb stops here, at the cap, whatever the headers claim.
	streamCap := func(entries int, content int64) int64 {
		return content + int64(entries+1)*2048 + 1<<20
	}
	cr := &countingReader{r: stream, limit: streamCap(0, 0)}
	tr := tar.NewReader(cr)

	b := &Bundle{Files: map[string][]byte{}, streamed: map[string]streamed{}, src: src, srcSize: size}
	sums := map[string][sha256.Size]byte{}
	seen := map[string]bool{}
	var total, held int64
	copyBuf := make([]byte, 32<<10)
	entries := 0
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil && !errors.Is(err, tar.ErrInsecurePath) {
			return nil, streamErr(err)
		}
		if hdr.Typeflag == tar.TypeXGlobalHeader {
			continue // PAX global metadata (git archive writes one): not an entry
		}
		entries++
		if entries > MaxEntries {
			return nil, Invalid("more than %d entries", MaxEntries)
		}
		name := hdr.Name
		switch hdr.Typeflag {
		case tar.TypeReg: // the reader reports the old "\x00" type as TypeReg (or TypeDir)
		case tar.TypeDir:
			name = strings.TrimSuffix(name, "/")
		case tar.TypeSymlink:
			return nil, Invalid("%s is a symlink", QuoteName(hdr.Name))
		case tar.TypeLink:
			return nil, Invalid("%s is a hard link", QuoteName(hdr.Name))
		case tar.TypeChar, tar.TypeBlock:
			return nil, Invalid("%s is a device", QuoteName(hdr.Name))
		case tar.TypeFifo:
			return nil, Invalid("%s is a FIFO", QuoteName(hdr.Name))
		default:
			return nil, Invalid("%s has entry type %q: only regular files and directories", QuoteName(hdr.Name), hdr.Typeflag)
		}
		if why := badName(name); why != "" {
			return nil, Invalid("entry name %s %s", QuoteName(hdr.Name), why)
		}
		if hdr.Mode&0o7000 != 0 {
			return nil, Invalid("%s has setuid, setgid or sticky bits", name)
		}
		cr.limit = streamCap(entries, total)
		if seen[name] {
			return nil, Invalid("%s appears twice", name)
		}
		seen[name] = true
		if hdr.Typeflag == tar.TypeDir {
			b.Dirs = append(b.Dirs, name)
			continue
		}
		if hdr.Size < 0 || hdr.Size > maxBytes-total {
			return nil, Invalid("more than %d bytes uncompressed (at %s)", maxBytes, name)
		}
		total += hdr.Size
		cr.limit = streamCap(entries, total)
		if hdr.Size <= MaxComposeBytes && held+hdr.Size <= heldBudget {
			buf := make([]byte, hdr.Size)
			if _, err := io.ReadFull(tr, buf); err != nil {
				return nil, streamErr(err)
			}
			held += hdr.Size
			b.Files[name] = buf
			sums[name] = sha256.Sum256(buf)
		} else {
			h := sha256.New()
			n, err := io.CopyBuffer(h, tr, copyBuf)
			if err == nil && n != hdr.Size {
				err = io.ErrUnexpectedEOF
			}
			if err != nil {
				return nil, streamErr(err)
			}
			s := streamed{size: hdr.Size, sum: [sha256.Size]byte(h.Sum(nil))}
			b.streamed[name] = s
			sums[name] = s.sum
		}
		// The header's size bounds what tar hands out; a byte beyond it would be a reader bug.
		if n, _ := tr.Read(copyBuf[:1]); n != 0 {
			return nil, Invalid("%s is longer than its header says", name)
		}
	}
	if gz {
		// Read the gzip stream to its end so that its checksum and length are verified.
		if _, err := io.Copy(io.Discard, cr); err != nil {
			return nil, streamErr(err)
		}
	}
	b.streamBytes = cr.n
	if err := checkParents(seen, b.Has); err != nil {
		return nil, err
	}
	sort.Strings(b.Dirs)
	if err := b.hold(heldFileMax, MetaFile, TemplateFile, ManifestFile); err != nil {
		return nil, heldErr(err)
	}
	if err := b.readMeta(); err != nil {
		return nil, err
	}
	if err := b.hold(MaxComposeBytes, b.Meta.ComposeFile); err != nil && !isRefusal(err) {
		return nil, heldErr(err) // a compose file over its bound stays where it is: Check refuses it by its size
	}
	b.Sha = ShaOfSums(sums)
	return b, nil
}

// heldErr is a failed hold's error: a refusal as it is; an archive that changed under the read
// is not a verdict on the bundle.
func heldErr(err error) error {
	if isRefusal(err) {
		return err
	}
	return fmt.Errorf("read the bundle: %w", err)
}

func isRefusal(err error) bool {
	var r *Refusal
	return errors.As(err, &r)
}

func streamErr(err error) *Refusal {
	switch {
	case errors.Is(err, errStreamCap):
		return Invalid("uncompressed stream larger than the size limit allows")
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return Invalid("archive is truncated")
	case errors.Is(err, gzip.ErrChecksum), errors.Is(err, gzip.ErrHeader):
		return Invalid("gzip stream is corrupt")
	case errors.Is(err, tar.ErrHeader):
		return Invalid("tar header is corrupt")
	}
	return Invalid("archive unreadable: %v", err)
}

// badName says why a (trailing-slash-stripped) entry name is refused, "" when it is fine.
func badName(name string) string {
	switch {
	case name == "":
		return "is empty"
	case strings.HasPrefix(name, "/"):
		return "is absolute"
	case strings.ContainsRune(name, 0):
		return "holds a NUL byte"
	case strings.Contains(name, "\\"):
		return "holds a backslash"
	}
	for _, seg := range strings.Split(name, "/") {
		if seg == ".." {
			return "has a .. segment"
		}
	}
	if path.Clean(name) != name || name == "." {
		return "is not clean"
	}
	return ""
}

// checkParents refuses a file that another entry treats as a directory (a/b under file a):
// such an archive cannot be unpacked as it reads.
func checkParents(seen map[string]bool, isFile func(string) bool) error {
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		for d := path.Dir(n); d != "."; d = path.Dir(d) {
			if isFile(d) {
				return Invalid("%s lies under %s, which is a file", n, d)
			}
		}
	}
	return nil
}

func (b *Bundle) readMeta() error {
	raw, ok := b.Files[MetaFile]
	if !ok {
		return Invalid("no %s", MetaFile)
	}
	var m Meta
	if err := json.Unmarshal(raw, &m); err != nil {
		return Invalid("%s is not valid JSON", MetaFile)
	}
	if m.ComposeFile == "" {
		m.ComposeFile = DefaultComposeFile
	}
	if m.DiskNeedBytes < 0 {
		return Invalid("%s: disk_need_bytes is negative", MetaFile)
	}
	listed := map[string]bool{}
	for _, f := range m.Files {
		listed[f] = true
	}
	var missing, extra []string
	for f := range listed {
		if f == MetaFile {
			continue
		}
		if !b.Has(f) {
			missing = append(missing, f)
		}
	}
	for _, f := range b.Names() {
		if f != MetaFile && !listed[f] {
			extra = append(extra, f)
		}
	}
	if len(missing) > 0 {
		return Invalid("%s files[] lists %s, not in the archive", MetaFile, firstFew(missing))
	}
	if len(extra) > 0 {
		return Invalid("archive holds %s, not in %s files[]", firstFew(extra), MetaFile)
	}
	if b.Has(EnvFile) {
		return Invalid("the bundle carries %s: the agent writes it from %s", EnvFile, TemplateFile)
	}
	// A directory named .env (an entry, or the parent of a file) would stand where the agent
	// writes .env: refused here, before any lease, not when staging fails after it.
	for _, d := range b.Dirs {
		if d == EnvFile {
			return Invalid("the bundle carries a directory %s: the agent writes the file %s from %s", EnvFile, EnvFile, TemplateFile)
		}
	}
	for _, f := range b.Names() {
		if strings.HasPrefix(f, EnvFile+"/") {
			return Invalid("the bundle carries a directory %s: the agent writes the file %s from %s", EnvFile, EnvFile, TemplateFile)
		}
	}
	if !b.Has(m.ComposeFile) {
		return Invalid("compose file %s is not in the archive", QuoteName(m.ComposeFile))
	}
	b.Meta = m
	return nil
}

func firstFew(names []string) string {
	sort.Strings(names)
	const few = 5
	s := make([]string, 0, few)
	for i, n := range names {
		if i == few {
			s = append(s, fmt.Sprintf("and %d more", len(names)-few))
			break
		}
		s = append(s, QuoteName(n))
	}
	return strings.Join(s, ", ")
}

// QuoteName prints a name from the archive safely: quoted when it holds anything unusual,
// cut when long.
func QuoteName(n string) string {
	if len(n) > 120 {
		n = n[:120] + "…"
	}
	for _, r := range n {
		if r < 0x20 || r == 0x7f || r == '"' || r == ' ' || r == 0xfffd {
			return fmt.Sprintf("%q", n)
		}
	}
	return n
}

func sprintf(format string, args ...any) string { return fmt.Sprintf(format, args...) }
