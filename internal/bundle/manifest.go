package bundle

import (
	"encoding/json"
	"strings"
)

// UseRegistryAuth marks the manifest entry holding the registry pull credential: not an env
// var, never written into `.env`.
const UseRegistryAuth = "registry-auth"

// DefaultKey is an entry's key when the manifest names none.
const DefaultKey = "value"

// Manifest is `secrets.manifest.json`: which OpenBao entries supply which variables.
type Manifest struct {
	Entries []Entry `json:"entries"`
}

// Entry is one manifest entry: Var (an env var) or Use == UseRegistryAuth, never both.
// Path is the KV-v2 path, mount included; Version, when set, pins the version read (≥ 1).
type Entry struct {
	Var     string `json:"var"`
	Use     string `json:"use"`
	Path    string `json:"path"`
	Key     string `json:"key"`
	Version *int   `json:"version"`
}

// Label names the entry in a detail: its variable, or "registry-auth".
func (e Entry) Label() string {
	if e.Var != "" {
		return e.Var
	}
	return e.Use
}

// Vars returns the variables the manifest supplies.
func (m Manifest) Vars() map[string]bool {
	out := map[string]bool{}
	for _, e := range m.Entries {
		if e.Var != "" {
			out[e.Var] = true
		}
	}
	return out
}

// RegistryAuth returns the registry credential entry, if the manifest has one.
func (m Manifest) RegistryAuth() (Entry, bool) {
	for _, e := range m.Entries {
		if e.Use == UseRegistryAuth {
			return e, true
		}
	}
	return Entry{}, false
}

// Manifest parses the bundle's secrets manifest; an absent file is an empty manifest. A
// malformed one is a *Refusal with code BUNDLE_INVALID. Paths are checked by Check.
func (b *Bundle) Manifest() (Manifest, error) {
	raw, ok := b.Files[ManifestFile]
	if !ok {
		return Manifest{}, nil
	}
	return parseManifest(raw)
}

func parseManifest(raw []byte) (Manifest, error) {
	var m Manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return Manifest{}, Invalid("%s is not valid JSON of the manifest's shape", ManifestFile)
	}
	vars := map[string]bool{}
	registry := 0
	for i := range m.Entries {
		e := &m.Entries[i]
		switch {
		case e.Var != "" && e.Use == "":
			if !ValidName(e.Var) {
				return Manifest{}, Invalid("%s entry %d: var %s is not a variable name", ManifestFile, i+1, QuoteName(e.Var))
			}
			if vars[e.Var] {
				return Manifest{}, Invalid("%s: var %s appears twice", ManifestFile, e.Var)
			}
			vars[e.Var] = true
		case e.Var == "" && e.Use == UseRegistryAuth:
			registry++
			if registry > 1 {
				return Manifest{}, Invalid("%s: more than one %s entry", ManifestFile, UseRegistryAuth)
			}
		default:
			return Manifest{}, Invalid("%s entry %d: needs either var or use: %s", ManifestFile, i+1, UseRegistryAuth)
		}
		if e.Key == "" {
			e.Key = DefaultKey
		}
		if e.Version != nil && *e.Version <= 0 {
			return Manifest{}, Invalid("%s entry %s: version must be ≥ 1", ManifestFile, e.Label())
		}
	}
	return m, nil
}

// pathUnder reports why a manifest path is refused for the env, "" when it is fine: it
// must lie under `<kvmount>/data/<env>/see/`, hold no `..` and name something there.
func PathRefused(p, kvMount, env string) string {
	prefix := kvMount + "/data/" + env + "/see/"
	if p == "" {
		return "has no path"
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == ".." || seg == "." {
			return "path " + QuoteName(p) + " has a " + seg + " segment"
		}
	}
	if !strings.HasPrefix(p, prefix) {
		return "path " + QuoteName(p) + " is not under " + prefix
	}
	rest := p[len(prefix):]
	if rest == "" || strings.HasPrefix(rest, "/") || strings.HasSuffix(rest, "/") || strings.Contains(rest, "//") {
		return "path " + QuoteName(p) + " does not name an entry under " + prefix
	}
	return ""
}
