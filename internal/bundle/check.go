package bundle

import (
	"fmt"
	"path"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// CheckInput is what the agent knows that the bundle is checked against.
type CheckInput struct {
	DesiredSha string // the check-in's desired_sha
	EnvID      string // the agent's env_id
	KVMount    string // the KV mount (the check-in's vault.mount, else the config's); "" means "monky"
}

// DefaultKVMount is the KV mount when CheckInput names none.
const DefaultKVMount = "monky"

// Check decides the refusals that need nothing but the bundle and the agent's own facts, in
// PROTOCOL.md's order: BUNDLE_INVALID (a malformed manifest, an unparsable compose file),
// BUNDLE_SHA_MISMATCH, BUNDLE_ENV_MISMATCH, ENV_INCOMPLETE, MANIFEST_PATH_REFUSED,
// PRIVILEGED_REFUSED. It returns nil when none applies; ROLLBACK_REFUSED and
// DISK_INSUFFICIENT come after it and are the caller's.
func Check(b *Bundle, in CheckInput) *Refusal {
	man, err := b.Manifest()
	if err != nil {
		return err.(*Refusal)
	}
	services, r := composeServices(b.Files[b.Meta.ComposeFile], b.Meta.ComposeFile)
	if r != nil {
		return r
	}
	if !strings.EqualFold(b.Sha, in.DesiredSha) {
		return &Refusal{Code: CodeShaMismatch, Detail: fmt.Sprintf("content sha %s ≠ desired %s", short(b.Sha), short(in.DesiredSha))}
	}
	if b.Meta.EnvID != in.EnvID {
		return &Refusal{Code: CodeEnvMismatch, Detail: fmt.Sprintf("bundle is for %s, this agent is %s", quoteName(b.Meta.EnvID), in.EnvID)}
	}
	if missing := Unresolved(b, man); len(missing) > 0 {
		return &Refusal{Code: CodeEnvIncomplete, Detail: "unresolved: " + strings.Join(missing, ", ")}
	}
	mount := in.KVMount
	if mount == "" {
		mount = DefaultKVMount
	}
	for _, e := range man.Entries {
		if why := pathRefused(e.Path, mount, in.EnvID); why != "" {
			return &Refusal{Code: CodeManifestPath, Detail: "entry " + e.Label() + ": " + why}
		}
	}
	if !b.Meta.Agent.AllowPrivileged {
		if f := privilegedFindings(services); len(f) > 0 {
			return &Refusal{Code: CodePrivileged, Detail: strings.Join(f, "; ") + " (bundle.json agent.allow_privileged is not set)"}
		}
	}
	return nil
}

// Unresolved returns the names `.env.template` references that no manifest entry supplies,
// sorted.
func Unresolved(b *Bundle, man Manifest) []string {
	have := man.Vars()
	var out []string
	for _, n := range References(b.Files[TemplateFile]) {
		if !have[n] {
			out = append(out, n)
		}
	}
	return out
}

func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	if sha == "" {
		return `""`
	}
	return sha
}

// PrivilegedFindings parses a compose file and lists what PROTOCOL.md §2 refuses without
// agent.allow_privileged: "service api: privileged: true", "service x: network_mode: host",
// "service x: pid: host", "service x: cap_add SYS_ADMIN", "service x: bind mount of /",
// "service x: bind mount of /var/run/docker.sock". An unparsable file is a *Refusal
// (BUNDLE_INVALID).
func PrivilegedFindings(compose []byte) ([]string, error) {
	services, r := composeServices(compose, DefaultComposeFile)
	if r != nil {
		return nil, r
	}
	return privilegedFindings(services), nil
}

func composeServices(raw []byte, name string) (s map[string]any, r *Refusal) {
	defer func() {
		if p := recover(); p != nil {
			s, r = nil, invalid("%s is not parsable YAML", quoteName(name))
		}
	}()
	var doc map[string]any
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return nil, invalid("%s is not parsable YAML", quoteName(name))
	}
	sv, ok := doc["services"]
	if !ok || sv == nil {
		return map[string]any{}, nil
	}
	services, ok := sv.(map[string]any)
	if !ok {
		return nil, invalid("%s: services is not a mapping", quoteName(name))
	}
	return services, nil
}

func privilegedFindings(services map[string]any) []string {
	names := make([]string, 0, len(services))
	for n := range services {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []string
	for _, n := range names {
		svc, ok := services[n].(map[string]any)
		if !ok {
			continue
		}
		add := func(f string) { out = append(out, "service "+quoteName(n)+": "+f) }
		if truthy(svc["privileged"]) {
			add("privileged: true")
		}
		if isHost(svc["network_mode"]) {
			add("network_mode: host")
		}
		if isHost(svc["pid"]) {
			add("pid: host")
		}
		if caps, ok := svc["cap_add"].([]any); ok {
			for _, c := range caps {
				cs, _ := c.(string)
				u := strings.TrimPrefix(strings.ToUpper(strings.TrimSpace(cs)), "CAP_")
				if u == "SYS_ADMIN" || u == "ALL" {
					add("cap_add " + u)
				}
			}
		}
		if vols, ok := svc["volumes"].([]any); ok {
			for _, v := range vols {
				if src := bindSource(v); src != "" {
					if hit := dangerousSource(src); hit != "" {
						add("bind mount of " + hit)
					}
				}
			}
		}
	}
	return out
}

func truthy(v any) bool {
	switch t := v.(type) {
	case bool:
		return t
	case string:
		s := strings.ToLower(strings.TrimSpace(t))
		return s == "true" || s == "yes" || s == "on" || s == "1"
	case int:
		return t != 0
	}
	return false
}

func isHost(v any) bool {
	s, _ := v.(string)
	return strings.EqualFold(strings.TrimSpace(s), "host")
}

// bindSource returns the host source of a bind mount in the short (`/:/host:ro`) or the long
// (`type: bind, source: /`) syntax, "" for anything else.
func bindSource(v any) string {
	switch t := v.(type) {
	case string:
		parts := strings.Split(t, ":")
		if len(parts) < 2 {
			return "" // an anonymous volume: /data
		}
		return strings.TrimSpace(parts[0])
	case map[string]any:
		typ, _ := t["type"].(string)
		src, _ := t["source"].(string)
		if typ == "bind" || (typ == "" && strings.HasPrefix(src, "/")) {
			return strings.TrimSpace(src)
		}
	}
	return ""
}

// dangerousSource names the refused mount a host path is, "" when it is none.
func dangerousSource(src string) string {
	if !strings.HasPrefix(src, "/") {
		return ""
	}
	switch c := path.Clean(src); c {
	case "/", "/var/run/docker.sock", "/run/docker.sock":
		return c
	}
	return ""
}
