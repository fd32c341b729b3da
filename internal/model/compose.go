package model

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

	"github.com/tikali/monky-deployd/internal/bundle"
	"github.com/tikali/monky-deployd/internal/composeguard"
	"github.com/tikali/monky-deployd/internal/sanitize"
)

// The privileged policy runs on the model compose itself will run: the bundle's compose_file
// loaded by compose's own loader (compose-go), with `include`, `extends`, merge keys, every
// profile and `${VAR:-default}` interpolation resolved, before any lease.
//
// What the loader sees is what compose will see at `up`, as far as it can be known before
// the secrets are read:
//   - the bundle's files of at most 1 MiB, written by the parent to a private scratch
//     directory that stands for the release directory (the loader reads files from disk:
//     includes, extends), read by the child one at a time;
//   - the environment compose interpolates with: the keys `.env.template` sets, as compose
//     will read them from `.env`, each reference to a secret standing as a placeholder; and
//     the names of the agent's own environment that docker will see (names only: their
//     values stand as placeholders too). Nothing else: the loader never reads the process
//     environment, and no COMPOSE_* setting reaches it;
//   - the loader reads no file outside the scratch directory: an `include` or `extends` path
//     that is absolute, climbs with `..` or names a remote resource is a finding and is not
//     read; an include's `project_directory` or `env_file` is a finding; env_file and
//     label_file contents are read only once the policy found nothing (resolveFiles), so
//     every path read lies below the release directory.
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
	phFor   func(kind, name string) string
	pol     *policy
}

var quietLoader sync.Once

// loadCompose loads the compose file of the scratch copy sc with compose-go. A file the
// loader cannot load, a compose file with more than one YAML document, or one over its bounds
// is a *Refusal (BUNDLE_INVALID); so is an include or extends path found outside the release
// directory when the loader stopped on it — loadCompose reports those as findings. withheld
// names the files the parent did not write (over the bounds by their size alone, and why);
// loadCompose adds those it finds over the bounds and removes them from sc, so that the loader
// cannot read them. The files are read one at a time: the child never holds the bundle.
func loadCompose(sc scratchCopy, withheld map[string]string, name string, tpl *bundle.EnvTemplate, env ComposeEnv, envID string) (*model, *bundle.Refusal) {
	quietLoader.Do(func() { logrus.SetOutput(io.Discard) }) // the loader's warnings are not ours to print
	content, err := sc.read(name)
	if err != nil {
		return nil, bundle.Invalid("cannot read the scratch copy of %s: %v", bundle.QuoteName(name), err)
	}
	if why := composeBound(content); why != "" {
		return nil, bundle.Invalid("%s %s", bundle.QuoteName(name), why)
	}
	if n := yamlDocuments(content); n > 1 {
		return nil, bundle.Invalid("%s holds %d YAML documents: a compose file is one document", bundle.QuoteName(name), n)
	}
	// Any other file an include or extends could name is bounded the same way; one over the
	// bounds is taken out of the scratch copy, so that the loader cannot read it. Each is read,
	// judged and let go before the next.
	var outside []string
	for _, n := range sc.names {
		if n == bundle.MetaFile {
			continue
		}
		data := content
		if n != name {
			if data, err = sc.read(n); err != nil {
				return nil, bundle.Invalid("cannot read the scratch copy of %s: %v", bundle.QuoteName(n), err)
			}
			if why := composeBound(data); why != "" {
				withheld[n] = why
				if err := os.Remove(filepath.Join(sc.root, n)); err != nil {
					return nil, bundle.Invalid("cannot withhold %s from the loader: %v", bundle.QuoteName(n), err)
				}
				continue
			}
		}
		outside = append(outside, includeSettingsOf(n, data)...)
	}
	if len(outside) > 0 {
		return &model{outside: outside}, nil // the loader would read them: it does not run
	}
	root, private := sc.root, sc.private

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
	for k, v := range tpl.Placeholders(func(n string) string { return phFor("s", n) }) {
		environment[k] = v // compose reads .env, and the agent strips these names from docker's environment
	}

	project := env.Project
	if project == "" {
		project = "monky-" + envID
	}
	m := &model{root: root, private: private, ph: regexp.MustCompile("/?MONKYVAL" + nonce + "-([se])-([A-Za-z0-9_]+)-"), phFor: phFor}
	guard := &composeguard.Guard{}
	details := types.ConfigDetails{
		WorkingDir:  root,
		ConfigFiles: []types.ConfigFile{{Filename: filepath.Join(root, name), Content: content}},
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
				return nil, bundle.Invalid("%s, which %s includes or extends, %s", bundle.QuoteName(n), bundle.QuoteName(name), withheld[n])
			}
		}
		return nil, bundle.Invalid("%s does not load: %s", bundle.QuoteName(name), m.words(err))
	}
	if len(p.ComposeFiles) == 0 {
		p.ComposeFiles = []string{filepath.Join(root, name)} // the loader leaves it to its callers
	}
	if words, err := Unstable(p); err != nil || len(words) > 0 {
		if err != nil {
			return nil, bundle.Invalid("%s does not print: %s", bundle.QuoteName(name), m.words(err))
		}
		return nil, bundle.Invalid("%s would not run as checked: %s", bundle.QuoteName(name), m.ph.ReplaceAllString(strings.Join(words, "; "), "$${$2}"))
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

// scratchCopy is the private copy of a bundle the loader reads, written by the parent
// (writeScratch) and read back by the child one file at a time: root stands for the release
// directory, private is its private parent, names are the files written below root.
type scratchCopy struct {
	root, private string
	names         []string
}

func (sc scratchCopy) read(n string) ([]byte, error) { return os.ReadFile(filepath.Join(sc.root, n)) }

// writeScratch writes b's directories and files below a new private directory in dir ("" is
// the system's temporary directory), scratchDepth levels down, but for the files over the
// bounds of a compose file by their size alone: those are withheld, with why (no parse here).
// The caller removes sc.private when the child has answered or died: a killed child leaves
// nothing behind.
func writeScratch(b *bundle.Bundle, dir string) (sc scratchCopy, withheld map[string]string, err error) {
	private, err := os.MkdirTemp(dir, "monky-deployd-verify-")
	if err != nil {
		return sc, nil, err
	}
	root := private
	for i := 0; i < scratchDepth; i++ {
		root = filepath.Join(root, fmt.Sprintf("d%d", i))
	}
	root = filepath.Join(root, "release")
	sc = scratchCopy{root: root, private: private}
	if err := os.MkdirAll(root, 0o700); err != nil {
		return sc, nil, err
	}
	if r, err := filepath.EvalSymlinks(root); err == nil {
		sc.private = strings.TrimSuffix(r, strings.TrimPrefix(root, private))
		sc.root = r
	}
	for _, d := range b.Dirs {
		if err := os.MkdirAll(filepath.Join(sc.root, d), 0o700); err != nil {
			return sc, nil, err
		}
	}
	withheld = map[string]string{}
	err = b.Each(func(n string, size int64, r io.Reader) error {
		if size > MaxComposeBytes {
			withheld[n] = sizeBound(size) // its size alone: nothing over the bound is read
			return nil
		}
		p := filepath.Join(sc.root, n)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return err
		}
		if err := writeFile(p, r); err != nil {
			return err
		}
		sc.names = append(sc.names, n)
		return nil
	})
	slices.Sort(sc.names)
	return sc, withheld, err
}

// writeFile writes r to a new private file at p.
func writeFile(p string, r io.Reader) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, r)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// findings lists what PRIVILEGED_REFUSED refuses: what was refused before the loader read it
// (include settings, include and extends paths), else the loaded model's findings (see
// CheckModel). unlisted: every finding is a field the allowlist does not name (OnlyUnlisted;
// a refusal before the loader read the file is never one).
func (m *model) findings() (words []string, unlisted bool) {
	out := append([]string{}, m.outside...)
	if m.project == nil {
		return out, false
	}
	f := m.pol.check(m.project)
	return append(out, findingStrings(f)...), len(m.outside) == 0 && OnlyUnlisted(f)
}

// includeSettings refuses an include entry that sets project_directory or env_file, in any
// of files that could be a compose file (all but bundle.json and the files withheld from the
// loader): see includeSettingsOf.
func includeSettings(files map[string][]byte, withheld map[string]string) []string {
	var out []string
	for _, n := range slices.Sorted(maps.Keys(files)) {
		if _, skip := withheld[n]; skip || n == bundle.MetaFile {
			continue
		}
		out = append(out, includeSettingsOf(n, files[n])...)
	}
	return out
}

// includeSettingsOf refuses an include entry of the file n (raw) that sets project_directory
// or env_file: either would let compose read outside the release directory, and the loader
// reads an include's env_file as it loads, so this runs before it. The file is decoded as YAML
// (JSON is YAML), so a key is seen as the loader sees it, whatever its spelling
// (`"\u0069nclude"`), through anchors and merge keys.
func includeSettingsOf(n string, raw []byte) []string {
	if !mayInclude(raw) {
		return nil
	}
	var out []string
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
					out = append(out, fmt.Sprintf("%s: include sets %s (an include reads only its own files, below the release directory)", bundle.QuoteName(n), k))
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
func PrivilegedFindings(b *bundle.Bundle, env ComposeEnv) ([]string, error) {
	if _, err := bundle.ParseEnvTemplate(b.Files[bundle.TemplateFile]); err != nil {
		return nil, err
	}
	f, _, err := loadBounded(context.Background(), b, env, b.Meta.EnvID)
	return f, err
}

// resolveFiles reads the env_file and label_file contents of m's services as compose will when
// it runs the release (the stage folds them into the model, model.Resolve), from the scratch
// copy, with the `.env` the stage would write from tpl (each secret a placeholder): one that
// does not read, or whose entries would not load again as themselves (Unstable), is a
// *Refusal (BUNDLE_INVALID) before any lease rather than after it. A file withheld from the
// scratch copy by its size is not read here (the stage reads it). resolveFiles runs only on a
// model the policy found nothing in, so every path it reads lies below the release directory.
func (m *model) resolveFiles(name string, tpl []byte, withheld map[string]string) *bundle.Refusal {
	values := map[string]string{}
	for _, n := range bundle.References(tpl) {
		values[n] = m.phFor("s", n)
	}
	env, err := bundle.Render(tpl, values)
	if err == nil {
		err = os.WriteFile(filepath.Join(m.root, bundle.EnvFile), env, 0o600)
	}
	if err != nil {
		return bundle.Invalid("cannot write the scratch copy's %s: %v", bundle.EnvFile, err)
	}
	p := m.project.WithoutUnnecessaryResources()
	for _, s := range p.Services {
		s.EnvFiles = slices.DeleteFunc(slices.Clone(s.EnvFiles), func(f types.EnvFile) bool { return m.isWithheld(f.Path, withheld) })
		s.LabelFiles = slices.DeleteFunc(slices.Clone(s.LabelFiles), func(f string) bool { return m.isWithheld(f, withheld) })
		p.Services[s.Name] = s
	}
	p, err = p.WithServicesEnvironmentResolved(true)
	if err == nil {
		p, err = p.WithServicesLabelsResolved(true)
	}
	if err != nil {
		return bundle.Invalid("%s does not load with its env_file and label_file contents: %s", bundle.QuoteName(name), m.words(err))
	}
	if words, err := Unstable(p); err != nil || len(words) > 0 {
		if err != nil {
			return bundle.Invalid("%s does not print: %s", bundle.QuoteName(name), m.words(err))
		}
		return bundle.Invalid("%s would not run as checked: %s", bundle.QuoteName(name), m.ph.ReplaceAllString(strings.Join(words, "; "), "$${$2}"))
	}
	return nil
}

// isWithheld: path (as the loader resolved it, below m.root) names a file withheld from the
// scratch copy.
func (m *model) isWithheld(path string, withheld map[string]string) bool {
	rel, err := filepath.Rel(m.root, path)
	if err != nil {
		return false
	}
	_, ok := withheld[filepath.ToSlash(rel)]
	return ok
}
