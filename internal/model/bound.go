package model

import (
	"bytes"
	"errors"
	"fmt"
	"github.com/tikali/monky-deployd/internal/bundle"
	"io"
	"slices"

	"go.yaml.in/yaml/v3"
)

// A compose file is bounded before any loader sees it, by what it costs and not only by its
// size: the nodes and the bytes its YAML aliases add when they are expanded, the aliases it
// holds, how deep it nests and how many services (and networks, volumes, secrets, configs) it
// defines. compose-go expands aliases (and merge keys) into plain maps and lists and copies each
// alias's string as it interpolates, and some of its passes grow faster than the file, so a few
// hundred kilobytes would otherwise cost gigabytes or minutes before any refusal. The same
// bounds hold for every file an include or extends could read. These counts are the first line
// and give the clear words; the hard line is the loader's child process (isolate.go), bounded
// by the operating system whatever the input.
const (
	// MaxComposeBytes is the largest compose file (or included or extended file) loaded
	// (bundle.MaxComposeBytes: the bundle's reader holds such files in memory).
	MaxComposeBytes = bundle.MaxComposeBytes
	// MaxAliasNodes is the most nodes alias expansion may add to one compose file: each
	// alias counts the nodes of what it stands for, expanded in turn.
	MaxAliasNodes = 100_000
	// MaxExpandedBytes bounds a compose file's scalars with every alias expanded.
	MaxExpandedBytes = 2 << 20
	// MaxAliases bounds the aliases (`*name`, merge keys' included) written in a compose file.
	MaxAliases = 1_000
	// MaxDepth bounds how deep a compose file's mappings and lists nest, aliases expanded.
	MaxDepth = 64
	// MaxDefinitions bounds the services, networks, volumes, secrets and configs a compose file
	// defines, together.
	MaxDefinitions = 1_000
)

// topEntries are the top-level keys whose entries MaxDefinitions counts.
var topEntries = []string{"services", "networks", "volumes", "secrets", "configs"}

// sizeBound is why a file of size bytes is over the bound of a compose file, "" when it is not.
func sizeBound(size int64) string {
	if size <= MaxComposeBytes {
		return ""
	}
	return fmt.Sprintf("is %d bytes, over the bound of %d bytes (1 MiB) for a compose file", size, MaxComposeBytes)
}

// composeBound says why raw is over the bounds for a compose file, "" when it is within
// them. A file that does not parse as YAML is within them when it holds no alias (the
// loader says why it does not load); with an alias it is refused, since its expansion
// cannot be measured. A file that holds no alias and no top-level key MaxDefinitions counts is
// not parsed: a 20 kB script full of `*` costs a scan, not a parse.
func composeBound(raw []byte) string {
	if len(raw) > MaxComposeBytes {
		return sizeBound(int64(len(raw)))
	}
	alias := mayAlias(raw)
	if !alias && !mayDefine(raw) {
		return ""
	}
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	added, aliases, entries := 0, 0, 0
	var scalars int64
	for {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return ""
		}
		if err != nil && alias {
			return "holds an alias and does not parse as YAML"
		}
		if err != nil {
			return "" // the loader says why
		}
		plain := countNodes(&doc)
		if aliases += countAliases(&doc); aliases > MaxAliases {
			return fmt.Sprintf("holds more than %d YAML aliases (the bound for a compose file)", MaxAliases)
		}
		c := &aliasCounter{memo: map[*yaml.Node]cost{}, open: map[*yaml.Node]bool{}, limit: plain + MaxAliasNodes - added}
		sz := c.size(&doc)
		added += sz.nodes - plain
		scalars += sz.bytes
		switch {
		case c.cycle:
			return "holds a YAML alias that contains itself"
		case added > MaxAliasNodes:
			return fmt.Sprintf("expands its YAML aliases to more than %d nodes (the bound for a compose file)", MaxAliasNodes)
		case scalars > MaxExpandedBytes:
			return fmt.Sprintf("expands its YAML aliases to more than %d bytes (2 MiB, the bound for a compose file)", MaxExpandedBytes)
		case sz.depth > MaxDepth:
			return fmt.Sprintf("nests more than %d levels deep (the bound for a compose file)", MaxDepth)
		}
		if entries += topCount(&doc); entries > MaxDefinitions {
			return fmt.Sprintf("defines more than %d services, networks, volumes, secrets and configs (the bound for a compose file)", MaxDefinitions)
		}
	}
}

// mayDefine says whether raw may hold a top-level key MaxDefinitions counts: spelled out, or
// through an escape, a tag or another encoding than UTF-8.
func mayDefine(raw []byte) bool {
	for _, k := range topEntries {
		if bytes.Contains(raw, []byte(k)) {
			return true
		}
	}
	return bytes.ContainsAny(raw, `\!`) || !utf8Plain(raw)
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

// countAliases counts the aliases of a document as written.
func countAliases(n *yaml.Node) int {
	s := 0
	if n.Kind == yaml.AliasNode {
		s = 1
	}
	for _, ch := range n.Content {
		s += countAliases(ch)
	}
	return s
}

// topCount is the entries of the document's top-level mappings MaxDefinitions counts, each
// mapping's merge keys expanded (as the loader does).
func topCount(doc *yaml.Node) int {
	if doc.Kind == yaml.DocumentNode && len(doc.Content) == 1 {
		doc = doc.Content[0]
	}
	doc = unalias(doc)
	if doc.Kind != yaml.MappingNode {
		return 0
	}
	n := 0
	for i := 0; i+1 < len(doc.Content); i += 2 {
		var k string
		if doc.Content[i].Decode(&k) != nil || !slices.Contains(topEntries, k) {
			continue
		}
		n += entryCount(unalias(doc.Content[i+1]), 0)
	}
	return n
}

// entryCount is a mapping's entries, those its merge keys bring counted in.
func entryCount(m *yaml.Node, depth int) int {
	if m.Kind != yaml.MappingNode || depth > MaxDepth {
		return 0
	}
	n := 0
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Tag != "!!merge" {
			n++
			continue
		}
		v := unalias(m.Content[i+1])
		if v.Kind == yaml.SequenceNode {
			for _, e := range v.Content {
				n += entryCount(unalias(e), depth+1)
			}
		} else {
			n += entryCount(v, depth+1)
		}
	}
	return n
}

func unalias(n *yaml.Node) *yaml.Node {
	for i := 0; n.Kind == yaml.AliasNode && n.Alias != nil && i < MaxDepth; i++ {
		n = n.Alias
	}
	return n
}

// cost is what a node stands for with its aliases expanded: its nodes, the bytes of its
// scalars, and its depth.
type cost struct {
	nodes int
	bytes int64
	depth int
}

// aliasCounter measures a document as the loader would expand it, each node once: size is
// what a node stands for with its aliases expanded, and its node count stops growing past
// limit, so a bomb costs no more than its text.
type aliasCounter struct {
	memo  map[*yaml.Node]cost
	open  map[*yaml.Node]bool
	limit int
	cycle bool
}

func (c *aliasCounter) size(n *yaml.Node) cost {
	if s, ok := c.memo[n]; ok {
		return s
	}
	if c.open[n] {
		c.cycle = true
		return cost{nodes: c.limit + 1}
	}
	c.open[n] = true
	s := cost{nodes: 1, bytes: int64(len(n.Value))}
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		s = c.add(cost{nodes: 1}, c.size(n.Alias), 0)
	}
	for _, ch := range n.Content {
		if s = c.add(s, c.size(ch), 1); s.nodes > c.limit {
			break
		}
	}
	delete(c.open, n)
	c.memo[n] = s
	return s
}

// add adds b to a, b standing below a by step levels, without growing past the limits (plus
// one, to say "over").
func (c *aliasCounter) add(a, b cost, step int) cost {
	a.nodes += b.nodes
	if a.nodes > c.limit {
		a.nodes = c.limit + 1
	}
	a.bytes = min(a.bytes+b.bytes, MaxExpandedBytes+1)
	a.depth = max(a.depth, b.depth+step)
	return a
}
