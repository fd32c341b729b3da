//go:build !urfave_cli_no_docs

package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tikali/monky-deployd/internal/testkit"
)

// TestManPageIsGenerated: the committed page is what `make man` generates from the commands.
func TestManPageIsGenerated(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"monky-deployd", "man"}, &out, &errb); code != 0 {
		t.Fatalf("man: exit %d: %s", code, errb.String())
	}
	committed, err := os.ReadFile(filepath.Join("..", "..", "packaging", "man", "monky-deployd.8"))
	if err != nil {
		t.Fatal(err)
	}
	if out.String() != string(committed) {
		t.Error("packaging/man/monky-deployd.8 differs from the generated page: run `make man`")
	}
	for _, want := range []string{".TH monky-deployd 8", ".SS explain", `\fB--ndjson\fP`, ".SS completion"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("man page lacks %q", want)
		}
	}
}

// TestManPageSections: the sections a man page has, in order, and groff renders the page with
// every warning on and says nothing.
func TestManPageSections(t *testing.T) {
	page, err := manPage(newApp(&bytes.Buffer{}, &bytes.Buffer{}))
	if err != nil {
		t.Fatal(err)
	}
	var sections []string
	for _, l := range strings.Split(page, "\n") {
		if s, ok := strings.CutPrefix(l, ".SH "); ok {
			sections = append(sections, s)
		}
	}
	want := "NAME SYNOPSIS DESCRIPTION GLOBAL OPTIONS COMMANDS EXIT STATUS FILES ENVIRONMENT SEE ALSO"
	if got := strings.Join(sections, " "); got != want {
		t.Errorf("sections %q, want %q", got, want)
	}
	for _, w := range []string{".SS status", ".SS explain", `status\fR [\fB\-\-json\fR] [\fB\-\-quiet\fR]`, "needs a person", ".B 75"} {
		if !strings.Contains(page, w) {
			t.Errorf("man page lacks %q", w)
		}
	}
	groff := testkit.Tool(t, "groff", "groff-base", "the man page rendered by groff -ww -man")
	if groff == "" {
		t.SkipNow()
	}
	cmd := exec.Command(groff, "-ww", "-man", "-Tutf8")
	cmd.Stdin = strings.NewReader(page)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil || errb.Len() > 0 {
		t.Errorf("groff -ww -man: %v\n%s", err, errb.String())
	}
	if !strings.Contains(out.String(), "EXIT STATUS") && !strings.Contains(out.String(), "E\bEX\bXI\bIT\bT") {
		t.Errorf("rendered page lacks EXIT STATUS:\n%s", out.String())
	}
}
