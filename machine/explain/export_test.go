package explain

import (
	"strings"

	"github.com/tikali/monky-deployd/internal/vocab"
)

// CodesMarkdown exports codesMarkdown to the package's tests.
var CodesMarkdown = codesMarkdown

// codesMarkdown is the table of every code of the vocabulary's registry, in code order: its
// kind, what it means and what to check, as explain prints them. docs/OPERATIONS.md holds it
// between marker lines (a test compares; go test ./machine/explain -run TestCodesMatchDocs
// -update rewrites it).
func codesMarkdown() string {
	var b strings.Builder
	b.WriteString("| code | kind | what it means | what to check |\n|---|---|---|---|\n")
	for _, c := range vocab.Codes() {
		cause, _ := vocab.CauseOf(c)
		fix := codeSpan(cause.Fix)
		if strings.HasPrefix(cause.Fix, vocab.NoCommand) {
			fix = strings.ReplaceAll(cell(cause.Fix), "<", `\<`) // words: no command addresses it
		}
		b.WriteString("| `" + string(c) + "` | " + cause.Kind.String() + " | " + strings.ReplaceAll(cell(sentence(cause.Fault)), "<", `\<`) + " | " + fix + " |\n")
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
