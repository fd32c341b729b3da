package model

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/compose-spec/compose-go/v2/types"
	"go.yaml.in/yaml/v3"

	"github.com/tikali/monky-deployd/internal/bundle"
	"github.com/tikali/monky-deployd/internal/sanitize"
)

// The resolved model is a fixed point (AGENT.md's amendments of 2026-12-02): the file compose
// runs, loaded again under any environment and in any working directory, is the model that was
// checked. Two things in a model break that, whatever the rest holds, and are refused:
//   - an environment entry without a value (`- HOME`, `HOME:` with nothing after it): compose
//     fills it from its own environment when it runs the file, so the container would get the
//     agent's HOME, PATH or DOCKER_CONFIG;
//   - a key holding `$`: compose interpolates values, never keys, so a key cannot be escaped —
//     `k$x` written `k$$x` runs as `k$$x`, written `k$x` it is a different text to every reader.
//
// Everything else is made a fixed point by ResolvedYAML: every `$` of a value is written `$$`
// (compose reads it back as one `$` and interpolates nothing), keys are written as they are, and
// a service whose model holds `network_mode: ""` (it joins no network) says so, since the model
// printed drops the empty value and compose would join it to the project's default network.

// Unstable lists what in p would not load again as itself: each environment entry without a
// value and each key holding `$`, naming the service (or the section) and the entry. nil when
// there is none. It is decided on p printed as compose prints it, so every key of every
// section is seen.
func Unstable(p *types.Project) ([]string, error) {
	doc, err := printed(p)
	if err != nil {
		return nil, err
	}
	var out []string
	walkKeys(doc, nil, func(path []string, key, val *yaml.Node) {
		where, field := section(path)
		if strings.Contains(key.Value, "$") {
			out = append(out, fmt.Sprintf("%s: %skey %s holds $ (compose never interpolates a key, so it cannot be escaped)", where, field, bundle.QuoteName(key.Value)))
		}
		if len(path) == 3 && path[0] == "services" && path[2] == "environment" && val.Tag == "!!null" {
			out = append(out, fmt.Sprintf("%s: environment %s has no value (compose would fill it from its own environment when it runs)", where, bundle.QuoteName(key.Value)))
		}
	})
	return out, nil
}

// ResolvedYAML is p as the file compose runs: p printed as compose's own `config` prints it,
// every `$` of a value written `$$`, keys as they are, and `network_mode: ""` kept on a service
// that joins no network. p must pass Unstable; a model that does not is an error.
func ResolvedYAML(p *types.Project) ([]byte, error) {
	if words, err := Unstable(p); err != nil || len(words) > 0 {
		if err == nil {
			err = fmt.Errorf("the model is not a fixed point: %s", strings.Join(words, "; "))
		}
		return nil, err
	}
	doc, err := printed(p)
	if err != nil {
		return nil, err
	}
	escapeValues(doc)
	if services := mapValue(doc, "services"); services != nil {
		for i := 0; i+1 < len(services.Content); i += 2 {
			name, svc := services.Content[i].Value, services.Content[i+1]
			s, ok := p.Services[name]
			if !ok || s.NetworkMode != "" || len(s.Networks) > 0 || svc.Kind != yaml.MappingNode || mapValue(svc, "network_mode") != nil {
				continue
			}
			svc.Content = append(svc.Content,
				&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: "network_mode"},
				&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: "", Style: yaml.DoubleQuotedStyle})
		}
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// PrintedYAML is p as `docker compose config` prints it: compose's own printing of the model,
// every `$` written `$$` (compose doubles them all; keys hold none once p passes Unstable).
// A resolved file loaded again by compose prints these bytes.
func PrintedYAML(p *types.Project) ([]byte, error) {
	out, err := p.MarshalYAML()
	if err != nil {
		return nil, err
	}
	return bytes.ReplaceAll(out, []byte("$"), []byte("$$")), nil
}

// printed is p printed by compose-go and read back as a YAML tree (its top mapping).
func printed(p *types.Project) (*yaml.Node, error) {
	raw, err := p.MarshalYAML()
	if err != nil {
		return nil, err
	}
	defer clear(raw)
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return nil, err
	}
	if doc.Kind == yaml.DocumentNode && len(doc.Content) == 1 {
		return doc.Content[0], nil
	}
	return &doc, nil
}

// walkKeys calls fn with every mapping key below n, the keys leading to its mapping, and its value.
func walkKeys(n *yaml.Node, path []string, fn func(path []string, key, val *yaml.Node)) {
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			fn(path, k, v)
			walkKeys(v, append(path[:len(path):len(path)], k.Value), fn)
		}
	case yaml.SequenceNode, yaml.DocumentNode:
		for _, c := range n.Content {
			walkKeys(c, path, fn)
		}
	}
}

// escapeValues writes every `$` of a scalar value below n as `$$`; keys are left as they are.
func escapeValues(n *yaml.Node) {
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			escapeValues(n.Content[i+1])
		}
	case yaml.SequenceNode, yaml.DocumentNode:
		for _, c := range n.Content {
			escapeValues(c)
		}
	case yaml.ScalarNode:
		n.Value = strings.ReplaceAll(n.Value, "$", "$$")
	}
}

// mapValue is the value of key in the mapping n; nil when n is no mapping or lacks it.
func mapValue(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

// section names where a key lies for a finding — `service api`, `network front`, the section's
// path (`x-common`) or "the compose file" at the top — and the field below it that holds the
// key, followed by a space ("labels ", "" when the key is the field's own).
func section(path []string) (where, field string) {
	if len(path) == 0 {
		return "the compose file", ""
	}
	kinds := map[string]string{"services": "service", "networks": "network", "volumes": "volume", "secrets": "secret", "configs": "config"}
	if k, ok := kinds[path[0]]; ok && len(path) >= 2 {
		where = k + " " + bundle.QuoteName(path[1])
		if len(path) > 2 {
			field = sanitize.Line(strings.Join(path[2:], ".")) + " "
		}
		return where, field
	}
	return sanitize.Line(strings.Join(path, ".")), ""
}
