package bundle

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"go.yaml.in/yaml/v3"
)

// A compose file is bounded before any loader sees it: its size, and how many nodes its YAML
// aliases add when they are expanded. compose-go expands aliases (and merge keys) into plain
// maps and lists, so a few hundred bytes of nested aliases would otherwise grow into
// gigabytes before any refusal. The same bounds hold for every file an include or extends
// could read.
const (
	// MaxComposeBytes is the largest compose file (or included or extended file) loaded.
	MaxComposeBytes = 1 << 20
	// MaxAliasNodes is the most nodes alias expansion may add to one compose file: each
	// alias counts the nodes of what it stands for, expanded in turn.
	MaxAliasNodes = 100_000
)

// composeBound says why raw is over the bounds for a compose file, "" when it is within
// them. A file that does not parse as YAML is within them when it holds no alias (the
// loader says why it does not load); with an alias it is refused, since its expansion
// cannot be measured.
func composeBound(raw []byte) string {
	if len(raw) > MaxComposeBytes {
		return fmt.Sprintf("is %d bytes, over the bound of %d bytes (1 MiB) for a compose file", len(raw), MaxComposeBytes)
	}
	if !mayAlias(raw) {
		return "" // no alias: what the loader builds is no larger than the text
	}
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	added := 0
	for {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return ""
		}
		if err != nil {
			return "holds an alias and does not parse as YAML"
		}
		plain := countNodes(&doc)
		c := &aliasCounter{memo: map[*yaml.Node]int{}, open: map[*yaml.Node]bool{}, limit: plain + MaxAliasNodes - added}
		added += c.size(&doc) - plain
		if c.cycle {
			return "holds a YAML alias that contains itself"
		}
		if added > MaxAliasNodes {
			return fmt.Sprintf("expands its YAML aliases to more than %d nodes (the bound for a compose file)", MaxAliasNodes)
		}
	}
}

// mayAlias says whether raw may hold a YAML alias that resolves: a `*name` whose name some
// `&name` defines (YAML's anchor names are letters, digits, `_` and `-`). A file in another
// encoding than UTF-8 (a byte-order mark, NUL bytes) may, whatever it holds. A file for which
// it says no is not parsed: a 20 kB script full of `*` costs a scan, not a parse.
func mayAlias(raw []byte) bool {
	if !bytes.ContainsRune(raw, '*') {
		return false
	}
	if !utf8Plain(raw) {
		return true
	}
	anchors := map[string]bool{}
	for _, n := range names(raw, '&') {
		anchors[n] = true
	}
	for _, n := range names(raw, '*') {
		if anchors[n] {
			return true
		}
	}
	return false
}

// utf8Plain says whether raw reads as UTF-8 to a YAML parser: no byte-order mark of UTF-16
// or UTF-32 and no NUL byte.
func utf8Plain(raw []byte) bool {
	return !bytes.HasPrefix(raw, []byte{0xfe, 0xff}) && !bytes.HasPrefix(raw, []byte{0xff, 0xfe}) && bytes.IndexByte(raw, 0) < 0
}

// names lists the runs of anchor-name characters that follow each mark in raw.
func names(raw []byte, mark byte) []string {
	var out []string
	for i := 0; i < len(raw); i++ {
		if raw[i] != mark {
			continue
		}
		j := i + 1
		for j < len(raw) && anchorChar(raw[j]) {
			j++
		}
		if j > i+1 {
			out = append(out, string(raw[i+1:j]))
		}
	}
	return out
}

func anchorChar(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c == '-'
}

// countNodes counts the nodes of a document as written, aliases unexpanded.
func countNodes(n *yaml.Node) int {
	s := 1
	for _, ch := range n.Content {
		s += countNodes(ch)
	}
	return s
}

// aliasCounter measures a document as the loader would expand it, each node once: size is
// the nodes a node stands for with its aliases expanded, and it stops growing past limit,
// so a bomb costs no more than its text.
type aliasCounter struct {
	memo  map[*yaml.Node]int
	open  map[*yaml.Node]bool
	limit int
	cycle bool
}

func (c *aliasCounter) size(n *yaml.Node) int {
	if s, ok := c.memo[n]; ok {
		return s
	}
	if c.open[n] {
		c.cycle = true
		return c.limit + 1
	}
	c.open[n] = true
	s := 1
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		s = c.add(s, c.size(n.Alias))
	}
	for _, ch := range n.Content {
		if s = c.add(s, c.size(ch)); s > c.limit {
			break
		}
	}
	delete(c.open, n)
	c.memo[n] = s
	return s
}

// add adds without growing past the limit (plus one, to say "over").
func (c *aliasCounter) add(a, b int) int {
	if a+b > c.limit {
		return c.limit + 1
	}
	return a + b
}
