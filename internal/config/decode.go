package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"go.yaml.in/yaml/v3"
)

// Every key of the file is looked up in the Config's own table of keys (keyTypes): one it does
// not have is reported with its line, and a did-you-mean when one key of the same mapping is a
// single edit away. yaml then decodes with KnownFields(true): a refusal of its that no key's
// problem explains is reported in its own words, so nothing yaml refuses is let through. The
// file's nodes say where each key is, so every problem names its key and line.
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

// decode reports, key by key in the file's order, each key the Config does not have and each
// value of a type its key does not take, then has yaml decode data into cfg with
// KnownFields(true). A refusal of yaml's that no key's problem explains is reported in yaml's
// words: nothing yaml refuses is let through.
func (p *parser) decode(data []byte, cfg *Config) {
	for _, e := range p.order {
		t, known := keyTypes[e.key]
		switch {
		case known:
			p.report(p.checkType(e, t))
		case knownParent(e):
			p.report(p.unknownKey(e))
		}
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	for _, o := range yamlProblems(dec.Decode(cfg)) {
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

// yaml's messages are read only when it refused something: their pattern is built then.
var yamlLineRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?s)^line (\d+): (.*)$`) })

// yamlProblems is yaml's refusals, each with its line when yaml gave one.
func yamlProblems(err error) []*Error {
	var te *yaml.TypeError
	if err == nil || !errors.As(err, &te) {
		if err != nil {
			return []*Error{{Msg: strings.TrimPrefix(err.Error(), "yaml: ")}}
		}
		return nil
	}
	var out []*Error
	for _, s := range te.Errors {
		m := yamlLineRe().FindStringSubmatch(s)
		if m == nil {
			out = append(out, &Error{Msg: s})
			continue
		}
		line, _ := strconv.Atoi(m[1])
		out = append(out, &Error{Line: line, Msg: m[2]})
	}
	return out
}

// knownParent reports whether the mapping holding e is the file's top or a mapping key the
// Config has (under a key it does not have, only that key is reported).
func knownParent(e *entry) bool {
	t, ok := keyTypes[e.parent]
	return e.parent == "" || ok && t.Kind() == reflect.Struct
}

func (p *parser) unknownKey(e *entry) *Error {
	if e.name == "approle" {
		return p.errf(e.key, "%s: %s", e.key, approleMsg)
	}
	if near := nearKey(e); near != "" {
		return p.errf(e.key, "unknown key %q (did you mean %q?)", e.key, near)
	}
	return p.errf(e.key, "unknown key %q", e.key)
}

// nearKey is the one key of e's mapping that is a single edit (a letter added, dropped,
// changed, or two neighbours swapped) away from e's name; "" when none or more than one is.
func nearKey(e *entry) string {
	prefix := ""
	if e.parent != "" {
		prefix = e.parent + "."
	}
	near := ""
	for k := range keyTypes {
		name, ok := strings.CutPrefix(k, prefix)
		if !ok || strings.Contains(name, ".") || !oneEdit(e.name, name) {
			continue
		}
		if near != "" {
			return ""
		}
		near = k
	}
	return near
}

// oneEdit reports whether a and b differ by exactly one edit: a byte inserted, deleted or
// replaced, or two adjacent bytes swapped.
func oneEdit(a, b string) bool {
	if len(a) > len(b) {
		a, b = b, a
	}
	if a == b || len(b)-len(a) > 1 {
		return false
	}
	i := 0
	for i < len(a) && a[i] == b[i] {
		i++
	}
	if len(a) < len(b) {
		return a[i:] == b[i+1:]
	}
	if a[i+1:] == b[i+1:] {
		return true
	}
	return i+1 < len(a) && a[i] == b[i+1] && a[i+1] == b[i] && a[i+2:] == b[i+2:]
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
