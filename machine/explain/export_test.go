package explain

import (
	"sort"
	"strings"
)

// CodesMarkdown exports codesMarkdown to the package's tests.
var CodesMarkdown = codesMarkdown

// codesMarkdown is the table of every code explain has words for, in code order: what it means
// and what to check, as explain prints them. docs/OPERATIONS.md holds it between marker lines
// (a test compares; go test ./machine/explain -run TestCodesMatchDocs -update rewrites it).
func codesMarkdown() string {
	codes := make([]string, 0, len(causes))
	for c := range causes {
		codes = append(codes, c)
	}
	sort.Strings(codes)
	var b strings.Builder
	b.WriteString("| code | what it means | what to check |\n|---|---|---|\n")
	for _, c := range codes {
		b.WriteString("| `" + c + "` | " + strings.ReplaceAll(cell(sentence(causes[c].fault)), "<", `\<`) + " | " + codeSpan(causes[c].fix) + " |\n")
	}
	return b.String()
}

// cell keeps a table cell on its row: its pipes escaped.
func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// codeSpan writes a command as inline code, fenced with one more backtick than it holds.
func codeSpan(s string) string {
	fence := "`"
	for strings.Contains(s, fence) {
		fence += "`"
	}
	pad := ""
	if strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") {
		pad = " "
	}
	return fence + pad + cell(s) + pad + fence
}

// CauseCodes are every code explain has words for.
func CauseCodes() []string {
	codes := make([]string, 0, len(causes))
	for c := range causes {
		codes = append(codes, c)
	}
	sort.Strings(codes)
	return codes
}
