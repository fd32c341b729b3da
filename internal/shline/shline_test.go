package shline

import "testing"

func TestSplitAndCommands(t *testing.T) {
	for _, c := range []struct{ line, code, comment string }{
		{"# only words", "", "# only words"},
		{"ls -l '/a #b' \"c#d\" x#y   # words # more", "ls -l '/a #b' \"c#d\" x#y", "   # words # more"},
		{"no comment; at all", "no comment; at all", ""},
	} {
		if code, comment := Split(c.line); code != c.code || comment != c.comment {
			t.Errorf("Split(%q) = %q, %q", c.line, code, comment)
		}
	}
	segs := Commands(`df -h "$(a | b; c)" x && { y || z; } | w`)
	var got []string
	for _, s := range segs {
		got = append(got, s.Sep+"|"+Start(s.Text))
	}
	want := []string{`|df -h "$(a | b; c)" x `, "&&|y ", "|||z", ";|} ", "||w"}
	if len(got) != len(want) {
		t.Fatalf("Commands: %q", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("segment %d: %q, want %q", i, got[i], want[i])
		}
	}
}
