package model

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/tikali/monky-deployd/internal/bundle"
	"github.com/tikali/monky-deployd/internal/testkit"
	"github.com/tikali/monky-deployd/internal/vocab"
)

// aliasFile is a compose file whose x-big list holds n references to a list of m scalars:
// alias expansion adds n*(m+1) nodes.
func aliasFile(n, m int) string {
	return "x-a: &a [" + strings.TrimSuffix(strings.Repeat("x,", m), ",") + "]\n" +
		"x-big: [" + strings.TrimSuffix(strings.Repeat("*a,", n), ",") + "]\n" +
		"services:\n  api:\n    image: x\n"
}

func TestComposeBound(t *testing.T) {
	for _, c := range []struct {
		name, raw, want string
	}{
		{"plain", okCompose, ""},
		{"a star in a value, no alias", "services:\n  api:\n    image: x\n    command: ['ls', '*.txt']\n", ""},
		{"aliases within the bound", aliasFile(999, 99), ""}, // adds 99,900 nodes
		{"aliases past the bound", aliasFile(999, 101), "expands its YAML aliases to more than 100000 nodes"},
		{"merge keys count", mergeServices(900, 120), "expands its YAML aliases"}, // 900 merges of 241 nodes
		{"aliases past their count", aliasFile(1001, 1), "holds more than 1000 YAML aliases"},
		{"an alias of a big scalar", "x-a: &a " + strings.Repeat("x", 4096) + "\nx-b: [" + strings.Repeat("*a,", 600) + "]\n", "expands its YAML aliases to more than 2097152 bytes"},
		{"deep", "services: {}\nx-a: " + strings.Repeat("[", 65) + strings.Repeat("]", 65) + "\n", "nests more than 64 levels deep"},
		{"deep through aliases", "x-a: &a " + strings.Repeat("[", 40) + strings.Repeat("]", 40) + "\nx-b: " + strings.Repeat("[", 30) + "*a" + strings.Repeat("]", 30) + "\n", "nests more than 64 levels deep"},
		{"many services", "services: {" + servicesFlow(1001) + "}\n", "defines more than 1000 services"},
		{"many services through a merge key", "x-s: &s {" + strings.Repeat("a: {image: x}, ", 1) + strings.TrimSuffix(servicesFlow(1000), ", ") + "}\nservices:\n  <<: *s\n", "defines more than 1000 services"},
		{"over the size", "# " + strings.Repeat("x", MaxComposeBytes) + "\n" + okCompose, "over the bound of 1048576 bytes"},
		{"alias and no parse", "x-a: &a [x]\nx-b: *a\n  bad: [\n", "does not parse as YAML"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := composeBound([]byte(c.raw))
			if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
				t.Errorf("composeBound = %q, want %q", got, c.want)
			}
		})
	}
}

// servicesFlow is n services as flow-mapping entries.
func servicesFlow(n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "s%d: {image: x}, ", i)
	}
	return b.String()
}

// mergeServices is n services each merging the anchor a, a mapping of keys keys.
func mergeServices(n, keys int) string {
	var b strings.Builder
	b.WriteString("x-a: &a {")
	for i := 0; i < keys; i++ {
		fmt.Fprintf(&b, "l%d: v, ", i)
	}
	b.WriteString("}\nservices:\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "  s%d: {<<: *a, image: x}\n", i)
	}
	return b.String()
}

// The bomb of testdata/compose/73-alias-bomb.txt, checked as a bundle: BUNDLE_INVALID from the
// text. (The time and memory it costs are in BenchmarkAliasBomb; before the bound, compose-go
// expanded it to more than 1.3 GB in a minute before the process ran out of memory.)
func TestAliasBombRefused(t *testing.T) {
	bomb := aliasBomb(t)
	if len(bomb) > 424 {
		t.Fatalf("the bomb is %d bytes", len(bomb))
	}
	b := bundleWith(t, map[string]string{"compose.yaml": bomb})
	r := Check(b, CheckInput{DesiredSha: b.Sha, EnvID: env})
	if r == nil || r.Code != vocab.BundleInvalid || !strings.Contains(r.Detail, "compose.yaml expands its YAML aliases") {
		t.Fatalf("got %v", r)
	}
}

// A file over the bounds that no include or extends names costs nothing: a large data file,
// one full of aliases, an env_file larger than a compose file may be.
func TestBoundedFilesNotNamedStillLoad(t *testing.T) {
	big := strings.Repeat("K=v\n", MaxComposeBytes/2)
	b := bundleWith(t, map[string]string{
		"compose.yaml":  "services:\n  api:\n    image: x\n    env_file: [big.env]\n    volumes: ['./data:/data:ro']\n",
		"big.env":       big,
		"data/bomb.yml": aliasBomb(t),
		"data/blob":     strings.Repeat("\x00\xff", MaxComposeBytes),
	})
	if r := Check(b, CheckInput{DesiredSha: b.Sha, EnvID: env}); r != nil {
		t.Fatalf("refused: %v", r)
	}
}

func aliasBomb(t testing.TB) string {
	raw, err := os.ReadFile(filepath.Join("..", "..", "testdata", "compose", "73-alias-bomb.txt"))
	if err != nil {
		t.Fatal(err)
	}
	_, bomb, ok := strings.Cut(string(raw), "-- compose.yaml --\n")
	if !ok {
		t.Fatal("73-alias-bomb.txt has no compose.yaml")
	}
	return bomb
}

// bundleWith reads a bundle of env holding files (bundle.json written for them unless given).
func bundleWith(t testing.TB, files map[string]string) *bundle.Bundle {
	var names []string
	var entries []testkit.TarEntry
	for n, body := range files {
		names = append(names, n)
		entries = append(entries, testkit.TarFile(n, body))
	}
	if _, ok := files[bundle.MetaFile]; !ok {
		entries = append(entries, testkit.TarFile(bundle.MetaFile, testkit.BundleMeta(env, nil, names...)))
	}
	b, err := bundle.Read(testkit.Tar(t, entries...), 0)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// BenchmarkAliasBomb is what refusing the 418-byte bomb costs, from its bundle to the
// refusal: time per refusal and bytes allocated (-benchmem).
func BenchmarkAliasBomb(b *testing.B) {
	bun := bundleWith(b, map[string]string{"compose.yaml": aliasBomb(b)})
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if r := Check(bun, CheckInput{DesiredSha: bun.Sha, EnvID: env}); r == nil || r.Code != vocab.BundleInvalid {
			b.Fatalf("got %v", r)
		}
	}
}

// An include whose env_file names another release's .env: the loader reads an include's
// env_file as it loads, and a value it read came back in the loader's error (and so in the
// refusal's detail, the state file and the report). The include settings are decided before
// the loader runs: the file is never read, its value never shown.
func TestIncludeEnvFileNeverRead(t *testing.T) {
	dir := t.TempDir()
	dotenv := filepath.Join(dir, ".env")
	if err := os.WriteFile(dotenv, []byte("PORT=canary-s3cr3t-Qx7\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	b := bundleWith(t, map[string]string{
		"compose.json":  `{"\u0069nclude": [{"path": "more.yaml", "env_file": "` + dotenv + `"}], "services": {"api": {"image": "x"}}}`,
		"more.yaml":     "services:\n  side:\n    image: y\n    ports: [\"${PORT}\"]\n",
		bundle.MetaFile: `{"env_id": "` + env + `", "compose_file": "compose.json", "files": ["compose.json", "more.yaml"]}`,
	})
	r := Check(b, CheckInput{DesiredSha: b.Sha, EnvID: env})
	if r == nil || strings.Contains(r.Error(), "canary") {
		t.Fatalf("got %v", r)
	}
	if r.Code != vocab.PrivilegedRefused || !strings.Contains(r.Detail, "compose.json: include sets env_file") {
		t.Errorf("got %v", r)
	}
}

// Every spelling of an include entry's env_file the loader would see is seen: the prefilter
// that spares a file its parse lets none of them by.
func TestIncludeSettingsSpellings(t *testing.T) {
	entry := `[{path: more.yaml, env_file: other.env}]`
	utf16 := func(s string) string {
		out := []byte{0xff, 0xfe}
		for _, r := range s {
			out = append(out, byte(r), 0)
		}
		return string(out)
	}
	for name, raw := range map[string]string{
		"plain":          "include: " + entry + "\n",
		"json escape":    `{"\u0069nclude": [{"path": "more.yaml", "env_file": "other.env"}]}`,
		"yaml escape":    `"\x69nclude": ` + entry + "\n",
		"binary tag":     "? !!binary aW5jbHVkZQ==\n: " + entry + "\n",
		"top-level <<":   "x-i: &i {include: " + entry + "}\n<<: *i\n",
		"utf-16":         utf16("include: " + entry + "\n"),
		"second in list": "include: [a.yaml, {path: b.yaml, env_file: c.env}]\n",
	} {
		t.Run(name, func(t *testing.T) {
			b := &bundle.Bundle{Files: map[string][]byte{"compose.yaml": []byte(raw)}}
			if got := includeSettings(b.Files, nil); len(got) != 1 || !strings.Contains(got[0], "include sets env_file") {
				t.Errorf("includeSettings = %q", got)
			}
		})
	}
	b := &bundle.Bundle{Files: map[string][]byte{"app.js": []byte("/* x */ const a = b * c; // include?\n"), "compose.yaml": []byte(okCompose)}}
	if got := includeSettings(b.Files, nil); len(got) != 0 {
		t.Errorf("includeSettings = %q", got)
	}
}

// mayAlias spares a parse only where no alias can resolve.
func TestMayAlias(t *testing.T) {
	for raw, want := range map[string]bool{
		"a: 1\n":                            false,
		"/* c */ x = a * b; y = a*b\n":      false, // no anchor
		"x = a &&b; y = *b\n":               true,  // &&b: conservative, b is an anchor name
		"x-a: &a [1]\ny: *a\n":              true,
		"x-a: &a-1 [1]\ny: [*a-1]\n":        true,
		"x-a: &a [1]\ny: *b\n":              false, // an unknown alias: the loader refuses it
		"\xff\xfex\x00:\x00 \x00*\x00a\x00": true,  // UTF-16
	} {
		if got := mayAlias([]byte(raw)); got != want {
			t.Errorf("mayAlias(%q) = %v, want %v", raw, got, want)
		}
	}
}

// decodedNodes counts a decoded YAML value as the loader holds it: each scalar, list and
// mapping one node, each mapping entry its key and value.
func decodedNodes(v any) int {
	switch x := v.(type) {
	case []any:
		n := 1
		for _, e := range x {
			n += decodedNodes(e)
		}
		return n
	case map[string]any:
		n := 1
		for _, e := range x {
			n += 1 + decodedNodes(e)
		}
		return n
	case map[any]any:
		n := 1
		for k, e := range x {
			n += decodedNodes(k) + decodedNodes(e)
		}
		return n
	}
	return 1
}

// What composeBound lets through is no larger, decoded with aliases and merge keys expanded,
// than its text's nodes plus MaxAliasNodes: the count is never below the expansion.
func FuzzComposeBound(f *testing.F) {
	f.Add([]byte(aliasFile(20, 30)))
	f.Add([]byte(aliasFile(999, 99)))
	f.Add([]byte(mergeServices(50, 20)))
	f.Add([]byte("x-a: &a {k: &b [1, 2]}\nx-b: [*a, *b, {<<: *a, j: *b}]\n"))
	f.Add([]byte("a: &a [*a]\n"))
	f.Add([]byte("x-a: &a [x,x,x]\nx-b: &b [*a,*a,*a]\nx-c: &c [*b,*b,*b]\nx-d: [*c,*c,*c]\n"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		if len(raw) > 4<<10 || composeBound(raw) != "" {
			return
		}
		var doc yaml.Node
		if yaml.Unmarshal(raw, &doc) != nil {
			return
		}
		var v any
		if err := yaml.Unmarshal(raw, &v); err != nil {
			return
		}
		if got, most := decodedNodes(v), countNodes(&doc)+MaxAliasNodes; got > most {
			t.Fatalf("decoded %d nodes, over %d", got, most)
		}
	})
}
