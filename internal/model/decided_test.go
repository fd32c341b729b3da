package model

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/tikali/monky-deployd/internal/vocab"
)

// docs/SECURITY.md's table "Fields decided" is the code's: the same rows in the same order,
// each with its fields, its decision and the words a refusal of it says (what it would do).
// Its section on allow_privileged says what the flag opens in the words advice uses.
func TestSecurityDocDecidesFieldsByEffect(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "docs", "SECURITY.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	i := strings.Index(doc, "### Fields decided")
	if i < 0 {
		t.Fatal(`SECURITY.md has no section "Fields decided"`)
	}
	tick := regexp.MustCompile("`([^`]+)`")
	var rows []decided
	in := false
	for _, line := range strings.Split(doc[i:], "\n") {
		if !strings.HasPrefix(line, "|") {
			if in {
				break
			}
			continue
		}
		in = true
		cells := strings.Split(strings.Trim(line, "|"), " | ")
		if len(cells) != 3 || strings.HasPrefix(cells[0], "---") || strings.TrimSpace(cells[0]) == "field" {
			continue
		}
		fieldCell := strings.TrimSpace(cells[0])
		d := decided{effect: strings.TrimSpace(cells[2])}
		if scope, _, ok := strings.Cut(fieldCell, " `"); ok && !strings.HasPrefix(fieldCell, "`") {
			d.scope = scope
		}
		for _, m := range tick.FindAllStringSubmatch(fieldCell, -1) {
			d.fields = append(d.fields, m[1])
		}
		switch strings.TrimSpace(cells[1]) {
		case "harmless: may be listed":
			d.harmless = true
		case "refused":
		default:
			t.Errorf("SECURITY.md: row %q decides %q", fieldCell, cells[1])
		}
		rows = append(rows, d)
	}
	if len(rows) != len(fieldsDecided) {
		t.Errorf("SECURITY.md decides %d rows of fields, the code %d", len(rows), len(fieldsDecided))
	}
	for k := 0; k < min(len(rows), len(fieldsDecided)); k++ {
		got, want := rows[k], fieldsDecided[k]
		if got.scope != want.scope || strings.Join(got.fields, " ") != strings.Join(want.fields, " ") || got.harmless != want.harmless || got.effect != want.effect {
			t.Errorf("SECURITY.md row %d is\n  %+v\nthe code's\n  %+v", k+1, got, want)
		}
	}
	for _, d := range fieldsDecided {
		if strings.Contains(d.effect, "; ") || strings.Contains(d.effect, "|") {
			t.Errorf("%v: the words %q hold \"; \" or \"|\"", d.fields, d.effect)
		}
		for _, f := range d.fields {
			allowed := serviceAllowed
			if d.scope == "network" {
				allowed = networkAllowed
			}
			if contains(allowed, f) {
				t.Errorf("%s is decided and listed too", f)
			}
		}
	}
	if flat := strings.Join(strings.Fields(doc), " "); !strings.Contains(flat, vocab.PrivilegedOpens) {
		t.Errorf("SECURITY.md does not say what agent.allow_privileged opens: %q", vocab.PrivilegedOpens)
	}
}
