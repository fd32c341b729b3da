package config

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"go.yaml.in/yaml/v3"
)

// Decoding is yaml's: KnownFields(true) refuses a key the Config does not have, at every
// depth. The file's nodes say where each key is, so every problem names its key and line.
// Two things are checked before yaml decodes, because yaml does not refuse them: a key given
// twice (yaml drops the whole mapping that holds it) and the scalars yaml reads more leniently
// than a config may be written (see takes).

// entry is one key of the file.
type entry struct {
	key    string     // dotted, e.g. "tenancy.port"
	name   string     // the key as written, e.g. "port"
	parent string     // the dotted key of the mapping that holds it; "" for the top
	line   int        // the key's line
	val    *yaml.Node // its value
}

// document reads the one YAML document in data and checks its shape: no anchors, aliases or
// merge keys, no nesting deeper than MaxDepth, no mapping of more than MaxKeys keys, every key
// a plain name given once, a mapping at the top. It returns that mapping (nil for an empty file), or the problems that stop
// everything else.
func (p *parser) document(data []byte) (*yaml.Node, []*Error) {
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil && !errors.Is(err, io.EOF) {
		return nil, []*Error{{Path: p.path, Msg: strings.TrimPrefix(err.Error(), "yaml: ")}}
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, []*Error{{Path: p.path, Line: extra.Line, Msg: "more than one YAML document"}}
	} else if !errors.Is(err, io.EOF) {
		return nil, []*Error{{Path: p.path, Msg: strings.TrimPrefix(err.Error(), "yaml: ")}}
	}
	if len(doc.Content) == 0 {
		return nil, nil
	}
	root := doc.Content[0]
	if err := p.shape(root, 1); err != nil {
		return nil, []*Error{err}
	}
	switch {
	case root.Kind == yaml.MappingNode:
	case isNull(root):
		return nil, nil
	default:
		return nil, []*Error{{Path: p.path, Line: root.Line, Msg: "the file must be a mapping of keys to values"}}
	}
	if errs := p.keysOnce(root, ""); len(errs) > 0 {
		return nil, errs
	}
	return root, nil
}

// shape refuses anchors, aliases, merge keys, deep nesting and huge mappings before anything
// is decoded.
func (p *parser) shape(n *yaml.Node, depth int) *Error {
	if n.Kind == yaml.AliasNode || n.Anchor != "" {
		return &Error{Path: p.path, Line: n.Line, Msg: "YAML anchors and aliases are not allowed"}
	}
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!merge" {
		return &Error{Path: p.path, Line: n.Line, Msg: "YAML merge keys (<<) are not allowed"}
	}
	if n.Kind == yaml.MappingNode || n.Kind == yaml.SequenceNode {
		if depth > MaxDepth {
			return &Error{Path: p.path, Line: n.Line, Msg: fmt.Sprintf("nesting deeper than %d levels", MaxDepth)}
		}
		if n.Kind == yaml.MappingNode && len(n.Content) > 2*MaxKeys {
			return &Error{Path: p.path, Line: n.Line, Msg: fmt.Sprintf("a mapping of more than %d keys", MaxKeys)}
		}
		for _, c := range n.Content {
			if err := p.shape(c, depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

// keysOnce refuses, in every mapping under m, a key that is not a plain name and a key given
// twice: which of two values counts is not for the agent to guess.
func (p *parser) keysOnce(m *yaml.Node, prefix string) []*Error {
	var errs []*Error
	first := map[string]int{}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		if k.Kind != yaml.ScalarNode || isNull(k) {
			errs = append(errs, &Error{Path: p.path, Line: k.Line, Msg: "a key must be a plain name"})
			continue
		}
		key := prefix + k.Value
		if line, dup := first[k.Value]; dup {
			errs = append(errs, &Error{Path: p.path, Line: k.Line, Key: key,
				Msg: fmt.Sprintf("key %q given twice (first on line %d)", key, line)})
			continue
		}
		first[k.Value] = k.Line
		if v.Kind == yaml.MappingNode {
			errs = append(errs, p.keysOnce(v, key+".")...)
		}
	}
	return errs
}

func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" }

// index records where each key of the mapping m is, at every depth, in the file's order.
func (p *parser) index(m *yaml.Node, prefix string) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		e := &entry{key: prefix + k.Value, name: k.Value, parent: strings.TrimSuffix(prefix, "."), line: k.Line, val: v}
		p.order = append(p.order, e)
		p.keys[e.key] = e
		if !isNull(v) {
			p.given[e.key] = true
		}
		if v.Kind == yaml.MappingNode {
			p.index(v, e.key+".")
		}
	}
}

// decode has yaml decode data into cfg with KnownFields(true) and reports, key by key in the
// file's order, each key yaml does not know and each value of a type its key does not take.
// A refusal of yaml's that no key's problem explains is reported in yaml's words: nothing
// yaml refuses is let through.
func (p *parser) decode(data []byte, cfg *Config) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	unknown, others := yamlProblems(dec.Decode(cfg))
	for _, e := range p.order {
		t, known := keyTypes[e.key]
		at := lineKey{e.line, e.name}
		switch {
		case !known && unknown[at] && knownParent(e):
			delete(unknown, at)
			p.report(p.unknownKey(e))
		case known:
			p.report(p.checkType(e, t))
		}
	}
	for _, at := range slices.SortedFunc(maps.Keys(unknown), func(a, b lineKey) int { return cmp.Compare(a.line, b.line) }) {
		others = append(others, &Error{Line: at.line, Msg: fmt.Sprintf("unknown key %q", at.name)})
	}
	for _, o := range others {
		if !p.explained(o.Line) {
			p.report(&Error{Path: p.path, Line: o.Line, Msg: o.Msg})
		}
	}
}

// explained reports whether a key on line (its name or its value) has a problem reported.
func (p *parser) explained(line int) bool {
	for _, e := range p.order {
		if p.bad[e.key] && (e.line == line || e.val.Line == line) {
			return true
		}
	}
	return false
}

// lineKey is a key as yaml names one it does not know: its line and its name.
type lineKey struct {
	line int
	name string
}

// yaml's messages are read only when it refused something: their patterns are built then.
var (
	yamlLineRe    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?s)^line (\d+): (.*)$`) })
	yamlUnknownRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?s)^field (.*) not found in type \S+$`) })
)

// yamlProblems sorts yaml's refusals: the keys it does not know, and the rest (with their line).
func yamlProblems(err error) (unknown map[lineKey]bool, others []*Error) {
	unknown = map[lineKey]bool{}
	var te *yaml.TypeError
	if err == nil || !errors.As(err, &te) {
		if err != nil {
			others = append(others, &Error{Msg: strings.TrimPrefix(err.Error(), "yaml: ")})
		}
		return unknown, others
	}
	for _, s := range te.Errors {
		m := yamlLineRe().FindStringSubmatch(s)
		if m == nil {
			others = append(others, &Error{Msg: s})
			continue
		}
		line, _ := strconv.Atoi(m[1])
		if u := yamlUnknownRe().FindStringSubmatch(m[2]); u != nil {
			unknown[lineKey{line, u[1]}] = true
			continue
		}
		others = append(others, &Error{Line: line, Msg: m[2]})
	}
	return unknown, others
}

// knownParent reports whether the mapping holding e is one the Config has (yaml looks no
// deeper than a key it does not know).
func knownParent(e *entry) bool {
	_, ok := keyTypes[e.parent]
	return e.parent == "" || ok
}

func (p *parser) unknownKey(e *entry) *Error {
	if e.name == "approle" {
		return p.errf(e.key, "%s: %s", e.key, approleMsg)
	}
	return p.errf(e.key, "unknown key %q", e.key)
}

// keyTypes is every key the Config has, dotted, with the type its value decodes into: read
// from the yaml tags yaml decodes by.
var keyTypes = typesOf(reflect.TypeOf(Config{}), "", map[string]reflect.Type{})

func typesOf(t reflect.Type, prefix string, into map[string]reflect.Type) map[string]reflect.Type {
	for i := 0; i < t.NumField(); i++ {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		if name == "" || name == "-" {
			continue
		}
		ft := t.Field(i).Type
		into[prefix+name] = ft
		if ft.Kind() == reflect.Struct {
			typesOf(ft, prefix+name+".", into)
		}
	}
	return into
}

// checkType refuses a value of a type key e does not take; an empty value is the default.
func (p *parser) checkType(e *entry, t reflect.Type) *Error {
	n := e.val
	switch {
	case isNull(n):
		return nil
	case t.Kind() == reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return p.errf(e.key, "%s: want a mapping of keys", e.key)
		}
		return nil
	case n.Kind != yaml.ScalarNode:
		return p.errf(e.key, "%s: want %s, got a %s", e.key, want(t), kindName(n.Kind))
	case !takes(t, n):
		v := n.Value
		if len(v) > 40 {
			v = v[:40] + "…"
		}
		return p.errf(e.key, "%s: want %s, got %q", e.key, want(t), v)
	}
	return nil
}

// takes reports whether the scalar n is a value of type t. It is stricter than yaml's own
// decoding, which reads YAML 1.1's yes, no, on and off as booleans, truncates 2.5 to an
// integer, takes .nan and .inf as numbers and decodes !!binary into a string.
func takes(t reflect.Type, n *yaml.Node) bool {
	switch tag := n.ShortTag(); t.Kind() {
	case reflect.String:
		return tag == "!!str" || tag == "!!int" || tag == "!!float" || tag == "!!bool" || tag == "!!timestamp"
	case reflect.Int, reflect.Int64:
		var x int64
		return tag == "!!int" && n.Decode(&x) == nil
	case reflect.Float64:
		var x float64
		return (tag == "!!int" || tag == "!!float") && n.Decode(&x) == nil && !math.IsNaN(x) && !math.IsInf(x, 0)
	case reflect.Bool:
		var x bool
		return tag == "!!bool" && n.Decode(&x) == nil
	case reflect.Pointer:
		return takes(t.Elem(), n)
	}
	return false
}

func want(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int64:
		return "an integer"
	case reflect.Float64:
		return "a number"
	case reflect.Bool, reflect.Pointer:
		return "true or false"
	}
	return "a mapping of keys"
}

func kindName(k yaml.Kind) string {
	switch k {
	case yaml.SequenceNode:
		return "list"
	case yaml.MappingNode:
		return "mapping"
	}
	return "value"
}
