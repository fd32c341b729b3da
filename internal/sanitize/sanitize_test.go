package sanitize

import "testing"

func TestLine(t *testing.T) {
	for in, want := range map[string]string{
		"plain sha 7a10":      "plain sha 7a10",
		"\x1b[2J":             `\x1b[2J`,
		"a\nb\tc\rd":          `a\nb\tc\rd`,
		"nul\x00":             `nul\x00`,
		"del\x7f":             `del\x7f`,
		"c1\u009b31m":         `c1\u009b31m`,
		"bidi\u202etxt.exe":   `bidi\u202etxt.exe`,
		"bad utf8 \xff\xfe":   `bad utf8 \xff\xfe`,
		"unicode → ünïcödé ✓": "unicode → ünïcödé ✓",
		"\u2028sep":           `\u2028sep`,
	} {
		if got := Line(in); got != want {
			t.Errorf("Line(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestText(t *testing.T) {
	in := "line 1\n\tline 2\x1b[31m red\r\n"
	want := "line 1\n\tline 2\\x1b[31m red\\r\n"
	if got := Text(in); got != want {
		t.Errorf("Text = %q, want %q", got, want)
	}
}

func FuzzLine(f *testing.F) {
	f.Add("\x1b[2J\u202e\xff")
	f.Fuzz(func(t *testing.T, s string) {
		for _, out := range []string{Line(s), Text(s)} {
			for _, r := range out {
				if r != '\n' && r != '\t' && unsafeRune(r) {
					t.Fatalf("%q: output %q holds control rune %U", s, out, r)
				}
			}
		}
		for _, r := range Line(s) {
			if r == '\n' || r == '\t' {
				t.Fatalf("Line(%q) kept a line break or tab", s)
			}
		}
	})
}

func TestShellWord(t *testing.T) {
	for in, want := range map[string]string{
		"/srv/monky/deploy":    "/srv/monky/deploy",
		"/srv/monky deploy":    "'/srv/monky deploy'",
		"/srv/it's":            `'/srv/it'\''s'`,
		"":                     "''",
		"/srv/$(reboot)":       "'/srv/$(reboot)'",
		"monky-env_qa-02:1.2%": "monky-env_qa-02:1.2%",
	} {
		if got := ShellWord(in); got != want {
			t.Errorf("ShellWord(%q) = %s, want %s", in, got, want)
		}
	}
}
