// Package redact masks secrets in every string the agent writes: logs, reports, the journal,
// status and explain output. Values are registered the moment they exist; token shapes
// (hvs., hvb., s., b., r., JWTs, Authorization: Bearer) are masked even when never registered.
// A registered value is found encoded, escaped, in any case, cut by a line break and in JSON
// `\u` escapes (see canon.go for the last three).
//
// It may not log, store or return a registered value in any form, and it does no I/O of its own
// beyond the writer it wraps.
package redact

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"

	"go.yaml.in/yaml/v3"

	"github.com/tikali/monky-deployd/internal/sanitize"
)

// Mask is what a secret is replaced with.
const Mask = "[REDACTED]"

// MinLen is the shortest value Add registers. Masking every "on", "1" or "abc" would shred the
// logs it protects, and a value that short is no secret worth the name: it is ignored.
const MinLen = 4

// minDerived is the shortest encoded form (a base64 fragment, say) that is registered: a shorter
// fragment would match ordinary text by chance.
const minDerived = 6

// Redactor masks registered values and known token shapes. It is safe for concurrent use.
type Redactor struct {
	mu     sync.RWMutex
	first  [1 << 16 / 64]uint64 // bitset of the first two bytes of every pattern
	byHead map[uint32][]string  // first four bytes → patterns, longest first
	seen   map[string]struct{}  // every pattern, to keep Add idempotent
	raw    map[string]struct{}  // the values as added, for Len
}

// New returns an empty Redactor; token shapes are masked from the start.
func New() *Redactor {
	return &Redactor{byHead: map[uint32][]string{}, seen: map[string]struct{}{}, raw: map[string]struct{}{}}
}

// Default is the process-wide redactor: logging wraps every output in it, and every effect that
// reads a token, a grant or a secret value registers it here.
var Default = New()

// Add registers a secret with Default.
func Add(secret string) { Default.Add(secret) }

// String masks s with Default.
func String(s string) string { return Default.String(s) }

// Len is how many values were registered (for tests and status; never the values).
func (r *Redactor) Len() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.raw)
}

// Add registers secret: the value itself and the forms it takes when encoded — base64 (standard
// and URL alphabets, padded or not, and the stable middle of each of the three alignments it can
// have inside a longer base64 text), hex, URL-escaped — and when escaped (see escapedForms),
// each folded to lower case and in its canonical form (see canon), so that it is also found
// re-cased, cut by a line break or in `\u` escapes. Values shorter than MinLen are ignored (see
// MinLen). Leading and trailing whitespace is not part of a secret.
//
// A secret of several lines is also registered line by line (each line of MinLen or more, as
// a value of its own): a program that prints it, and compose, which prefixes every line it
// relays with the service's name (`api-1  | `), cut it into lines that are never contiguous in
// the output. The whole is found across the breaks and prefixes too.
func (r *Redactor) Add(secret string) {
	secret = strings.TrimSpace(secret)
	if len(secret) < MinLen {
		return
	}
	if strings.ContainsAny(secret, "\n\r") {
		for _, line := range strings.FieldsFunc(secret, func(c rune) bool { return c == '\n' || c == '\r' }) {
			r.Add(line)
		}
	}
	forms := matchForms(nil, secret, MinLen)
	for _, f := range append(encodedForms(secret), escapedForms(secret)...) {
		if f != secret {
			forms = matchForms(forms, f, minDerived)
		}
	}

	r.mu.Lock()
	defer r.mu.Unlock()
	r.raw[secret] = struct{}{}
	for _, f := range forms {
		if _, ok := r.seen[f]; ok {
			continue
		}
		r.seen[f] = struct{}{}
		h2 := binary.LittleEndian.Uint16([]byte(f[:2]))
		r.first[h2/64] |= 1 << (h2 % 64)
		h4 := binary.LittleEndian.Uint32([]byte(f[:4]))
		l := append(r.byHead[h4], f)
		sort.SliceStable(l, func(i, j int) bool { return len(l[i]) > len(l[j]) })
		r.byHead[h4] = l
	}
}

// matchForms appends f as the matcher compares it, folded and canonical (see canon), each if it
// is least bytes or longer.
func matchForms(forms []string, f string, least int) []string {
	for _, g := range []string{asciiLower(f), canonString(f)} {
		if len(g) >= least && (len(forms) == 0 || forms[len(forms)-1] != g) {
			forms = append(forms, g)
		}
	}
	return forms
}

// String returns s with every registered value and every known token shape replaced by Mask.
func (r *Redactor) String(s string) string {
	spans := r.spans(s)
	if len(spans) == 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	last := 0
	for _, sp := range spans {
		b.WriteString(s[last:sp.lo])
		b.WriteString(Mask)
		last = sp.hi
	}
	b.WriteString(s[last:])
	return b.String()
}

// Bytes is String for a byte slice; it returns p itself when nothing was masked.
func (r *Redactor) Bytes(p []byte) []byte {
	s := string(p)
	out := r.String(s)
	if len(out) == len(s) && out == s {
		return p
	}
	return []byte(out)
}

type span struct{ lo, hi int }

// spans finds every range to mask, sorted and merged: the registered values in the text folded,
// then in its canonical forms (see canon), then the token shapes.
func (r *Redactor) spans(s string) []span {
	var sp []span
	lower := asciiLower(s)
	r.mu.RLock()
	if len(r.seen) > 0 {
		sp = match(r, sp, lower, nil)
		if c, ok := canon(s, true); ok {
			sp = match(r, sp, c.b, &c)
			c.release()
			if c.prefixes {
				c, _ = canon(s, false)
				sp = match(r, sp, c.b, &c)
				c.release()
			}
		}
	}
	r.mu.RUnlock()
	sp = appendShapes(sp, s, lower)
	if len(sp) == 0 {
		return nil
	}
	sort.Slice(sp, func(i, j int) bool { return sp[i].lo < sp[j].lo })
	out := sp[:1]
	for _, x := range sp[1:] {
		last := &out[len(out)-1]
		if x.lo <= last.hi {
			if x.hi > last.hi {
				last.hi = x.hi
			}
			continue
		}
		out = append(out, x)
	}
	return out
}

// match appends the ranges of the registered values in t, a text folded or, with c, canonical
// (the ranges are then c's text's own). The caller holds r.mu.
func match[T string | []byte](r *Redactor, sp []span, t T, c *canonical) []span {
	for i := 0; i+4 <= len(t); i++ {
		h2 := uint16(t[i]) | uint16(t[i+1])<<8
		if r.first[h2/64]&(1<<(h2%64)) == 0 {
			continue
		}
		h4 := uint32(t[i]) | uint32(t[i+1])<<8 | uint32(t[i+2])<<16 | uint32(t[i+3])<<24
		for _, p := range r.byHead[h4] {
			if len(t)-i >= len(p) && string(t[i:i+len(p)]) == p {
				if c == nil {
					sp = append(sp, span{i, i + len(p)})
				} else {
					sp = c.appendSpans(sp, i, i+len(p))
				}
				break
			}
		}
	}
	return sp
}

// Writer wraps w so that everything written through it is redacted a complete line at a time: a
// secret split across two Write calls within one line is still masked. The returned writer is a
// *LineWriter; call Flush (or Close) to write out a last line without a newline.
func (r *Redactor) Writer(w io.Writer) io.Writer { return &LineWriter{r: r, w: w} }

// maxLine bounds what a LineWriter holds back waiting for a newline; a longer run is redacted
// and written as it is.
const maxLine = 1 << 20

// LineWriter is the line-buffered redacting writer returned by Redactor.Writer.
// It is safe for concurrent use.
type LineWriter struct {
	r   *Redactor
	w   io.Writer
	mu  sync.Mutex
	buf []byte
}

// Write buffers p and writes out every complete line, redacted, in one Write to the wrapped writer.
func (lw *LineWriter) Write(p []byte) (int, error) {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	lw.buf = append(lw.buf, p...)
	end := bytes.LastIndexByte(lw.buf, '\n') + 1
	if end == 0 && len(lw.buf) < maxLine {
		return len(p), nil
	}
	if end == 0 {
		end = len(lw.buf)
	}
	out := lw.r.Bytes(lw.buf[:end])
	_, err := lw.w.Write(out)
	rest := copy(lw.buf, lw.buf[end:])
	lw.buf = lw.buf[:rest]
	if err != nil {
		return 0, err
	}
	return len(p), nil
}

// Flush writes out what is buffered (a last line without its newline), redacted.
func (lw *LineWriter) Flush() error {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	if len(lw.buf) == 0 {
		return nil
	}
	out := lw.r.Bytes(lw.buf)
	lw.buf = lw.buf[:0]
	_, err := lw.w.Write(out)
	return err
}

// Close flushes. It does not close the wrapped writer.
func (lw *LineWriter) Close() error { return lw.Flush() }

// Tail is the last n bytes of s, masked before the cut: a secret the cut goes through leaves no
// part of it in clear, as it would if s were cut first and masked after. The cut never splits a
// rune (the result may then be a few bytes short of n).
func (r *Redactor) Tail(s string, n int) string {
	s = r.String(s)
	if len(s) <= n {
		return s
	}
	s = s[len(s)-n:]
	for i := 0; i < 4 && len(s) > 0 && s[0]&0xc0 == 0x80; i++ {
		s = s[1:]
	}
	return s
}

// Tail is Redactor.Tail with Default.
func Tail(s string, n int) string { return Default.Tail(s, n) }

// encodedForms is secret encoded: base64 (standard and URL alphabets, padded or not, and the
// stable middle of each of the three alignments it can have inside a longer base64 text), hex
// in both cases, URL query- and path-escaped. There may be duplicates and short fragments.
func encodedForms(secret string) []string {
	var out []string
	b := []byte(secret)
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
		out = append(out, enc.EncodeToString(b))
		raw := enc.WithPadding(base64.NoPadding)
		out = append(out, raw.EncodeToString(b))
		for k := 0; k < 3; k++ {
			// The secret preceded by k bytes: the characters that depend on the secret's bits only.
			buf := append(make([]byte, k), b...)
			e := raw.EncodeToString(buf)
			lo, hi := (8*k+5)/6, 8*(k+len(b))/6
			if hi > lo {
				out = append(out, e[lo:hi])
			}
		}
	}
	h := hex.EncodeToString(b)
	return append(out, h, strings.ToUpper(h), url.QueryEscape(secret), url.PathEscape(secret))
}

// escapers are the ways the agent escapes a string on its way to a sink: sanitize's Line and
// Text (an error or a log tail made printable), strconv.Quote and QuoteToASCII (what %q and %+q
// print, quotes aside), JSON, with and without HTML escaping (json.Marshal; the logger and
// json.Encoder without it), and the forms the agent writes itself into the resolved model
// (<deploy_dir>/resolved/<sha>.yaml): every `$` doubled, YAML's escaping (a double-quoted or
// single-quoted scalar), and lower case (an error or a name compared without case). Each returns
// the escaped text without surrounding quotes.
var escapers = []func(string) string{
	sanitize.Line,
	sanitize.Text,
	func(s string) string { q := strconv.Quote(s); return q[1 : len(q)-1] },
	func(s string) string { q := strconv.QuoteToASCII(s); return q[1 : len(q)-1] },
	func(s string) string {
		j, err := json.Marshal(s)
		if err != nil {
			return s
		}
		return string(j[1 : len(j)-1])
	},
	func(s string) string {
		var b bytes.Buffer
		e := json.NewEncoder(&b)
		e.SetEscapeHTML(false)
		if e.Encode(s) != nil {
			return s
		}
		j := bytes.TrimSpace(b.Bytes())
		return string(j[1 : len(j)-1])
	},
	func(s string) string { return strings.ReplaceAll(s, "$", "$$") },
	yamlScalar,
	func(s string) string { return strings.ReplaceAll(s, "'", "''") },
	strings.ToLower,
}

// yamlScalar is s as the YAML encoder writes it as a value, quotes aside: plain, or escaped in
// double quotes (`\e`, `\t`, `\u202E`), or single-quoted; a value the encoder folds across
// lines is returned as it is (its lines are registered one by one).
func yamlScalar(s string) string {
	var n yaml.Node
	n.SetString(s)
	out, err := yaml.Marshal(&n)
	if err != nil {
		return s
	}
	q := strings.TrimSuffix(string(out), "\n")
	if len(q) >= 2 && (q[0] == '"' && q[len(q)-1] == '"' || q[0] == '\'' && q[len(q)-1] == '\'') {
		return q[1 : len(q)-1]
	}
	return q
}

// escapedForms is secret escaped once and twice by every escaper: a call site escapes (an
// error's text through sanitize.Line, a value through %q) and the sink encodes again (the
// logger's JSON, a report's JSON body), so a secret that holds a tab, a quote or a backslash
// reaches the sink in a form that no longer contains it. Forms equal to secret are left out;
// there may be duplicates.
func escapedForms(secret string) []string {
	var out []string
	for _, e1 := range escapers {
		once := e1(secret)
		if once == secret {
			continue
		}
		out = append(out, once)
		for _, e2 := range escapers {
			if twice := e2(once); twice != once {
				out = append(out, twice)
			}
		}
	}
	return out
}
