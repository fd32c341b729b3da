// Package hostile makes the compose files of issue 37's cost classes: small texts that cost the
// compose loader far more than their size (aliases of a big scalar, many aliases, many services,
// deep nesting, one big block scalar). They are generated, not committed: each is up to 1 MiB.
// The bundle tests assert the verdict on each, and `make bench` (test/bench/hostile.sh) measures
// `check bundle` and a tick on them. The package writes nothing and imports nothing of the agent.
package hostile

import (
	"fmt"
	"strings"
)

// A Case is one cost class: its name, what it is, the compose file, the verdict code a box
// gives (BUNDLE_INVALID, or "" when the model loads within the budget and applies) and the
// bound a refusal names (Bound: one of these words).
type Case struct {
	Name    string
	About   string
	Want    string
	Compose func() []byte
	Bound   []string
	// Files are the bundle's other files (nil: none), by their path in the bundle.
	Files func() map[string][]byte
}

// Names reports whether a refusal's detail names the case's bound: one of its words.
func (c Case) Names(detail string) bool {
	for _, w := range c.Bound {
		if strings.Contains(detail, w) {
			return true
		}
	}
	return false
}

const (
	aliasBound  = "holds more than 1000 YAML aliases"
	memoryBound = "the load used up its memory bound (64 MiB)"
)

// maxFile is the largest compose file a bundle may carry (bundle.MaxComposeBytes).
const maxFile = 1 << 20

// Cases lists the classes in the order of the issue.
func Cases() []Case {
	return []Case{
		{"alias-400k-x2000", "2,000 aliases of a 400 KiB scalar", "BUNDLE_INVALID", func() []byte { return bigAliases(400<<10, 2000) }, []string{aliasBound}, nil},
		{"alias-1b-x100000", "100,000 aliases of a one-byte scalar", "BUNDLE_INVALID", func() []byte { return bigAliases(1, 100000) }, []string{aliasBound}, nil},
		{"alias-600k-x99000", "99,000 aliases of a 600 KiB scalar", "BUNDLE_INVALID", func() []byte { return bigAliases(600<<10, 99000) }, []string{aliasBound}, nil},
		// 46,000 services come within a few MiB of the child's memory bound while their nodes
		// are counted (docs/PERFORMANCE.md): which bound names them first depends on the binary
		// the child is, so either is the verdict
		{"services-46000", "46,000 one-line services in 1 MiB", "BUNDLE_INVALID", func() []byte { return services(46000) }, []string{"defines more than 1000 services", memoryBound}, nil},
		{"nesting-100", "100 levels of nesting", "BUNDLE_INVALID", func() []byte { return nesting(100) }, []string{"nests more than 64 levels deep"}, nil},
		{"block-1mib", "a block scalar of almost 1 MiB", "", blockScalar, nil, nil},
		{"nodes-1mib", "1 MiB of one-byte list items, no alias (past the counts: the OS limit)", "BUNDLE_INVALID", denseList, []string{memoryBound}, nil},
		// a benign release whose assets fill most of a bundle: the loader child reads what
		// compose reads, never the assets (issue 47: 16–24 MiB of files were refused for good)
		{"benign-60mib-assets", "a benign compose file beside 60 MiB of assets", "", benignCompose, nil, largeAssets},
	}
}

// benignCompose serves the release's assets read-only.
func benignCompose() []byte {
	return []byte("services:\n  web:\n    image: nginx\n    volumes: ['./assets:/usr/share/nginx/html:ro']\n")
}

// largeAssets are 60 MiB of assets: one binary file of 48 MiB and twelve text files of 1 MiB.
func largeAssets() map[string][]byte {
	files := map[string][]byte{"assets/video.bin": []byte(strings.Repeat("\x00\x01binary", 48<<20/8))}
	line := strings.Repeat("body { color: red; }\n", 50)
	for i := 0; i < 12; i++ {
		files[fmt.Sprintf("assets/style-%02d.css", i)] = []byte(strings.Repeat(line, (1<<20)/len(line)))
	}
	return files
}

// bigAliases is one service whose command lists n aliases of one scalar of size bytes, in flow
// style (`[*v,*v,…]`, 3 bytes an alias): the loader copies the scalar at every alias.
func bigAliases(size, n int) []byte {
	var b strings.Builder
	b.WriteString("x-v: &v \"")
	b.WriteString(strings.Repeat("x", size))
	b.WriteString("\"\nservices:\n  api:\n    image: busybox\n    command: [")
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("*v")
	}
	b.WriteString("]\n")
	return []byte(b.String())
}

// services is n services of one line each.
func services(n int) []byte {
	var b strings.Builder
	b.WriteString("services:\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "  s%x: {image: x}\n", i)
	}
	return []byte(b.String())
}

// nesting is a service whose label value is a mapping nested depth levels deep, as an
// extension field the loader keeps.
func nesting(depth int) []byte {
	var b strings.Builder
	b.WriteString("services:\n  api:\n    image: busybox\n    x-deep: ")
	b.WriteString(strings.Repeat("{a: ", depth))
	b.WriteString("x")
	b.WriteString(strings.Repeat("}", depth))
	b.WriteString("\n")
	return []byte(b.String())
}

// blockScalar is a service whose command is one literal block scalar filling the file.
func blockScalar() []byte {
	var b strings.Builder
	b.WriteString("services:\n  api:\n    image: busybox\n    command:\n      - sh\n      - -c\n      - |\n")
	line := "        echo " + strings.Repeat("y", 60) + "\n"
	for b.Len()+len(line) <= maxFile-64 {
		b.WriteString(line)
	}
	return []byte(b.String())
}

// denseList is a service whose command lists one-byte items filling the file: no alias, no
// many services, but half a million nodes — what the counts do not bound, the child's memory
// limit does.
func denseList() []byte {
	var b strings.Builder
	b.WriteString("services:\n  api:\n    image: busybox\n    command: [a")
	for b.Len()+4 <= maxFile {
		b.WriteString(",a")
	}
	b.WriteString("]\n")
	return []byte(b.String())
}
