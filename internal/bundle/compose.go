package bundle

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
	"github.com/sirupsen/logrus"
	"go.yaml.in/yaml/v3"

	"github.com/tikali/monky-deployd/internal/composeguard"
	"github.com/tikali/monky-deployd/internal/sanitize"
)

// The privileged policy runs on the model compose itself will run: the bundle's compose_file
// loaded by compose's own loader (compose-go), with `include`, `extends`, merge keys, every
// profile and `${VAR:-default}` interpolation resolved, before any lease.
//
// What the loader sees is what compose will see at `up`, as far as it can be known before
// the secrets are read:
//   - the bundle's files, written to a private scratch directory that stands for the
//     release directory (the loader reads files from disk: includes, extends);
//   - the environment compose interpolates with: the keys `.env.template` sets, as compose
//     will read them from `.env`, each reference to a secret standing as a placeholder; and
//     the names of the agent's own environment that docker will see (names only: their
//     values stand as placeholders too). Nothing else: the loader never reads the process
//     environment, and no COMPOSE_* setting reaches it;
//   - the loader reads no file outside the scratch directory: an `include` or `extends` path
//     that is absolute, climbs with `..` or names a remote resource is a finding and is not
//     read; an include's `project_directory` or `env_file` is a finding; env_file and
//     label_file contents are not read (their paths are checked).
//
// A value that depends on a placeholder cannot be known before the lease, so where the
// policy looks (a mount's source, network_mode, cap_add, …) it is a finding of its own.

// scratchDepth is how deep below its private directory the scratch release lies, so that a
// source climbing out of it by up to this many `..` is still shown relative to the release.
const scratchDepth = 4

// model is a loaded compose project and what loading it found.
type model struct {
	project *types.Project
	root    string   // the scratch release directory, symlinks resolved
	private string   // its private parent
	outside []string // what was refused before the loader read it: include settings, include/extends paths
	ph      *regexp.Regexp
	pol     *policy
}

var quietLoader sync.Once

// loadCompose loads the bundle's compose file with compose-go. A file the loader cannot load,
// a compose file with more than one YAML document, or a scratch directory that cannot be
// written is a *Refusal (BUNDLE_INVALID); so is an include or extends path found outside the
// release directory when the loader stopped on it — loadCompose reports those as findings.
func loadCompose(b *Bundle, tpl *envTemplate, env ComposeEnv, envID string) (*model, *Refusal) {
	quietLoader.Do(func() { logrus.SetOutput(io.Discard) }) // the loader's warnings are not ours to print
	name := b.Meta.ComposeFile
	if why := composeBound(b.Files[name]); why != "" {
		return nil, invalid("%s %s", quoteName(name), why)
	}
	// Any other file an include or extends could name is bounded the same way; one over
	// the bounds is left out of the scratch copy, so that the loader cannot read it.
	withheld := map[string]string{}
	for n, data := range b.Files {
		if n != name && n != MetaFile {
			if why := composeBound(data); why != "" {
				withheld[n] = why
			}
		}
	}
	if n := yamlDocuments(b.Files[name]); n > 1 {
		return nil, invalid("%s holds %d YAML documents: a compose file is one document", quoteName(name), n)
	}
	if f := includeSettings(b, withheld); len(f) > 0 {
		return &model{outside: f}, nil // the loader would read them: it does not run
	}
	private, err := os.MkdirTemp(env.ScratchDir, "monky-deployd-verify-")
	if err != nil {
		return nil, invalid("cannot write a scratch copy to load the compose file: %v", err)
	}
	defer os.RemoveAll(private)
	root := private
	for i := 0; i < scratchDepth; i++ {
		root = filepath.Join(root, fmt.Sprintf("d%d", i))
	}
	root = filepath.Join(root, "release")
	if err := materialize(root, b, withheld); err != nil {
		return nil, invalid("cannot write a scratch copy to load the compose file: %v", err)
	}
	if r, err := filepath.EvalSymlinks(root); err == nil {
		private = strings.TrimSuffix(r, strings.TrimPrefix(root, private))
		root = r
	}

	var nb [6]byte
	_, _ = rand.Read(nb[:])
	nonce := hex.EncodeToString(nb[:])
	phFor := func(kind, n string) string { return "/MONKYVAL" + nonce + "-" + kind + "-" + n + "-" }
	environment := types.Mapping{}
	for _, n := range env.AgentEnv {
		if n != "" && !strings.HasPrefix(n, "COMPOSE_") {
			environment[n] = phFor("e", n)
		}
	}
	for k, v := range tpl.placeholders(func(n string) string { return phFor("s", n) }) {
		environment[k] = v // compose reads .env, and the agent strips these names from docker's environment
	}

	project := env.Project
	if project == "" {
		project = "monky-" + envID
	}
	m := &model{root: root, private: private, ph: regexp.MustCompile("/?MONKYVAL" + nonce + "-([se])-([A-Za-z0-9_]+)-")}
	guard := &composeguard.Guard{}
	details := types.ConfigDetails{
		WorkingDir:  root,
		ConfigFiles: []types.ConfigFile{{Filename: filepath.Join(root, name), Content: b.Files[name]}},
		Environment: environment,
	}
	p, err := loader.LoadWithContext(context.Background(), details, func(o *loader.Options) {
		o.SetProjectName(project, true)
		o.Profiles = []string{"*"} // every service, whatever profile would start it
		o.ResolvePaths = true
		o.SkipResolveEnvironment = true // env_file contents are not read; their paths are checked
		o.SkipResolveLabels = true      // label_file likewise
		o.ResourceLoaders = []loader.ResourceLoader{guard}
	})
	if refused := guard.Refused(); len(refused) > 0 {
		m.outside = refused
		return m, nil
	}
	if err != nil {
		for _, n := range slices.Sorted(maps.Keys(withheld)) {
			if strings.Contains(err.Error(), filepath.Join(root, n)) {
				return nil, invalid("%s, which %s includes or extends, %s", quoteName(n), quoteName(name), withheld[n])
			}
		}
		return nil, invalid("%s does not load: %s", quoteName(name), m.words(err))
	}
	if len(p.ComposeFiles) == 0 {
		p.ComposeFiles = []string{filepath.Join(root, name)} // the loader leaves it to its callers
	}
	if words, err := Unstable(p); err != nil || len(words) > 0 {
		if err != nil {
			return nil, invalid("%s does not print: %s", quoteName(name), m.words(err))
		}
		return nil, invalid("%s would not run as checked: %s", quoteName(name), m.ph.ReplaceAllString(strings.Join(words, "; "), "$${$2}"))
	}
	m.project = p
	m.pol = &policy{root: m.root, private: m.private, ph: m.ph}
	return m, nil
}

// words is a loader error as one line: the scratch directory shown as the release, the
// placeholders as the variables they stand for, control characters escaped.
func (m *model) words(err error) string {
	msg := err.Error()
	msg = strings.ReplaceAll(msg, m.root+string(filepath.Separator), "")
	msg = strings.ReplaceAll(msg, m.root, ".")
	msg = strings.ReplaceAll(msg, m.private, "<scratch>")
	msg = m.ph.ReplaceAllString(msg, "$${$2}")
	msg = strings.Join(strings.Fields(msg), " ")
	if len(msg) > 400 {
		msg = strings.ToValidUTF8(msg[:400], "") + "…"
	}
	return sanitize.Line(msg)
}

// yamlDocuments counts the YAML documents in raw (0 when it does not parse: the loader says why).
func yamlDocuments(raw []byte) int {
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	n := 0
	for {
		var node yaml.Node
		if err := dec.Decode(&node); err != nil {
			if errors.Is(err, io.EOF) {
				return n
			}
			return n
		}
		n++
	}
}

// materialize writes b's directories and files below root, but for the files withheld.
func materialize(root string, b *Bundle, withheld map[string]string) error {
	if err := os.MkdirAll(root, 0o700); err != nil {
		return err
	}
	for _, d := range b.Dirs {
		if err := os.MkdirAll(filepath.Join(root, d), 0o700); err != nil {
			return err
		}
	}
	for n, data := range b.Files {
		if _, ok := withheld[n]; ok {
			continue
		}
		p := filepath.Join(root, n)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return err
		}
		if err := os.WriteFile(p, data, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// findings lists what PRIVILEGED_REFUSED refuses: what was refused before the loader read it
// (include settings, include and extends paths), else the loaded model's findings (see
// CheckModel). unlisted: every finding is a field the allowlist does not name (OnlyUnlisted;
// a refusal before the loader read the file is never one).
func (m *model) findings(b *Bundle) (words []string, unlisted bool) {
	out := append([]string{}, m.outside...)
	if m.project == nil {
		return out, false
	}
	f := m.pol.check(m.project)
	return append(out, findingStrings(f)...), len(m.outside) == 0 && OnlyUnlisted(f)
}

// includeSettings refuses an include entry that sets project_directory or env_file, in any
// of the bundle's files that could be a compose file (all but bundle.json and the files
// withheld from the loader): either would let compose read outside the release directory,
// and the loader reads an include's env_file as it loads, so this runs before it. Each file
// is decoded as YAML (JSON is YAML), so a key is seen as the loader sees it, whatever its
// spelling (`"\u0069nclude"`), through anchors and merge keys.
func includeSettings(b *Bundle, withheld map[string]string) []string {
	var out []string
	for _, n := range slices.Sorted(maps.Keys(b.Files)) {
		if _, skip := withheld[n]; skip || n == MetaFile {
			continue
		}
		raw := b.Files[n]
		if !mayInclude(raw) {
			continue
		}
		dec := yaml.NewDecoder(bytes.NewReader(raw))
		for {
			var node yaml.Node
			if err := dec.Decode(&node); err != nil {
				break
			}
			if !topKey(&node, "include", "<<") {
				continue // decoding a whole document is costly: only one that may include
			}
			var doc any
			if err := node.Decode(&doc); err != nil {
				continue
			}
			list, _ := stringKeys(doc)["include"].([]any)
			for _, e := range list {
				entry := stringKeys(e)
				for _, k := range []string{"project_directory", "env_file"} {
					if _, ok := entry[k]; ok {
						out = append(out, fmt.Sprintf("%s: include sets %s (an include reads only its own files, below the release directory)", quoteName(n), k))
					}
				}
			}
		}
	}
	return out
}

// mayInclude says whether raw may hold the key include: spelled out, or through an escape
// (`\`), a tag (`!!binary`), or another encoding than UTF-8. A file for which it says no is
// not parsed.
func mayInclude(raw []byte) bool {
	return bytes.Contains(raw, []byte("include")) || bytes.ContainsAny(raw, `\!`) || !utf8Plain(raw)
}

// topKey says whether the document node is a mapping with one of keys at its top level, each
// key decoded as the loader decodes it.
func topKey(doc *yaml.Node, keys ...string) bool {
	if doc.Kind == yaml.DocumentNode && len(doc.Content) == 1 {
		doc = doc.Content[0]
	}
	for doc.Kind == yaml.AliasNode && doc.Alias != nil {
		doc = doc.Alias
	}
	if doc.Kind != yaml.MappingNode {
		return false
	}
	for i := 0; i+1 < len(doc.Content); i += 2 {
		var k string
		if err := doc.Content[i].Decode(&k); err != nil {
			continue
		}
		for _, want := range keys {
			if k == want {
				return true
			}
		}
	}
	return false
}

// stringKeys is a decoded YAML mapping by its string keys (nil when v is no mapping).
func stringKeys(v any) map[string]any {
	switch m := v.(type) {
	case map[string]any:
		return m
	case map[any]any:
		out := map[string]any{}
		for k, x := range m {
			if ks, ok := k.(string); ok {
				out[ks] = x
			}
		}
		return out
	}
	return nil
}

// union is the entries of a and of b in one new map; b's win where both hold a key.
func union[M ~map[string]V, V any](a, b M) map[string]V {
	out := make(map[string]V, len(a)+len(b))
	maps.Copy(out, a)
	maps.Copy(out, b)
	return out
}

// PrivilegedFindings loads b's compose file as Check does (in a bounded child) and lists what
// PRIVILEGED_REFUSED would refuse (nil when nothing). A bundle whose `.env.template` or compose
// file does not load is a *Refusal (BUNDLE_INVALID).
func PrivilegedFindings(b *Bundle, env ComposeEnv) ([]string, error) {
	if _, err := parseEnvTemplate(b.Files[TemplateFile]); err != nil {
		return nil, err
	}
	f, _, err := loadBounded(context.Background(), b, env, b.Meta.EnvID)
	return f, err
}
