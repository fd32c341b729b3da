package bundle

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/compose-spec/compose-go/v2/dotenv"
	"github.com/compose-spec/compose-go/v2/template"
)

// The rendered `.env` is read back by compose's own dotenv parser (compose-go `dotenv`), so it
// is written in a form that parser returns byte for byte, whatever bytes a secret holds:
//
//  1. The template is read the way compose reads a `.env`, with every reference `${NAME}`
//     replaced by a marker made of characters no part of that parser changes (letters,
//     digits, `-`, `_`) — so quotes, `#`, `$` and escapes in the template mean what they mean
//     to compose, and a reference is an opaque slot for the secret's bytes.
//  2. Each key's value is that result with every marker replaced by the secret's bytes.
//  3. Each key is written on its own line, sorted, its value unquoted when it holds only
//     characters the parser keeps as they are, else double-quoted with `\`, `"` and `$`
//     escaped. Nothing in the file depends on the agent's environment or on another line.
//
// A value the container cannot receive unchanged — a NUL byte, bytes that are not UTF-8
// (compose hands the environment to the engine as JSON) — is refused, naming the variable.
// A template that sets COMPOSE_* or DOCKER_* is refused: those settings are the agent's.

// EnvTemplate is `.env.template` read as compose reads a `.env`, references as markers.
type EnvTemplate struct {
	values map[string]string // key → value, each reference as its marker
	nonce  string
	re     *regexp.Regexp // markerRE's, compiled once per template
}

var markerShape = `-MONKYREF%s-([A-Za-z0-9_]+)-`

func (t *EnvTemplate) marker(name string) string { return "-MONKYREF" + t.nonce + "-" + name + "-" }

// markerRE matches a marker and captures its name. It is compiled once per template: a tick
// reads the template to mask the box's secrets, and each compile is about 50,000 instructions.
func (t *EnvTemplate) markerRE() *regexp.Regexp {
	if t.re == nil {
		t.re = regexp.MustCompile(fmt.Sprintf(markerShape, t.nonce))
	}
	return t.re
}

// replaceRefs is tpl with each reference outside a comment line replaced by with(name).
func replaceRefs(tpl string, with func(name string) string) string {
	var src strings.Builder
	for li, line := range strings.Split(tpl, "\n") {
		if li > 0 {
			src.WriteByte('\n')
		}
		if isComment([]byte(line)) {
			src.WriteString(line)
			continue
		}
		last := 0
		scanLine([]byte(line), func(start, end int, name string) {
			src.WriteString(line[last:start])
			src.WriteString(with(name))
			last = end
		})
		src.WriteString(line[last:])
	}
	return src.String()
}

// ParseEnvTemplate reads the template. Its errors are *Refusal (BUNDLE_INVALID) and quote no
// value.
func ParseEnvTemplate(tpl []byte) (*EnvTemplate, error) {
	t := &EnvTemplate{}
	for {
		var b [8]byte
		_, _ = rand.Read(b[:])
		t.nonce = hex.EncodeToString(b[:])
		if !strings.Contains(string(tpl), t.nonce) {
			break
		}
	}
	src := replaceRefs(string(tpl), t.marker)
	values, err := dotenv.UnmarshalWithLookup(src, func(string) (string, bool) { return "", false })
	if err != nil {
		return nil, Invalid("%s: %s", TemplateFile, dotenvProblem(err))
	}
	re := t.markerRE()
	var keys []string
	for k, v := range values {
		if strings.Contains(k, t.nonce) {
			return nil, Invalid("%s: a reference stands where a key is expected", TemplateFile)
		}
		if k == "" {
			return nil, Invalid("%s: a line has an empty key", TemplateFile)
		}
		if strings.Contains(re.ReplaceAllString(v, ""), t.nonce) {
			// a reference inside another expansion (`${A${B}}`, `${A:-x${B}}`): compose would
			// read part of the secret's slot as a default or a name — no value can stand there
			return nil, Invalid("%s: the value of %s has a reference inside another ${…}", TemplateFile, QuoteName(k))
		}
		if why := uncarried(re.ReplaceAllString(v, "")); why != "" {
			return nil, Invalid("%s: the value of %s %s", TemplateFile, QuoteName(k), why)
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var reserved []string
	for _, k := range keys {
		u := strings.ToUpper(k)
		if strings.HasPrefix(u, "COMPOSE_") || strings.HasPrefix(u, "DOCKER_") {
			reserved = append(reserved, QuoteName(k))
		}
	}
	if len(reserved) > 0 {
		return nil, Invalid("%s sets %s: compose's and docker's own settings are the agent's, never the bundle's", TemplateFile, strings.Join(reserved, ", "))
	}
	t.values = values
	return t, nil
}

var dotenvLine = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^line \d+: (unterminated quoted value|unexpected character|key cannot contain a space)`)
})

// dotenvProblem is the dotenv parser's words without the template text it quotes: compose-go's
// typed template errors by their type; its line errors, which it returns untyped
// (fmt.Errorf), by their fixed words.
func dotenvProblem(err error) string {
	var invalidTemplate *template.InvalidTemplateError
	var missing *template.MissingRequiredError
	switch {
	case errors.As(err, &invalidTemplate):
		return "a `${` that compose cannot read (write a literal `${` as `$${`)"
	case errors.As(err, &missing):
		return "a `${VAR:?…}` that compose would refuse"
	}
	if m := dotenvLine().FindString(err.Error()); m != "" {
		return m
	}
	return "compose's .env reader cannot read it"
}

// uncarried says why a value cannot reach a container unchanged, "" when it can.
func uncarried(v string) string {
	switch {
	case strings.IndexByte(v, 0) >= 0:
		return "holds a NUL byte"
	case !utf8.ValidString(v):
		return "is not UTF-8"
	}
	return ""
}

// Keys returns the keys `.env.template` sets, read as compose reads a `.env`, sorted.
func (t *EnvTemplate) Keys() []string {
	keys := make([]string, 0, len(t.values))
	for k := range t.values {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Placeholders is the template's keys with every reference replaced by a placeholder of its
// own, for loading the compose file before any secret is read.
func (t *EnvTemplate) Placeholders(ph func(name string) string) map[string]string {
	re := t.markerRE()
	out := make(map[string]string, len(t.values))
	for k, v := range t.values {
		out[k] = re.ReplaceAllStringFunc(v, func(m string) string { return ph(re.FindStringSubmatch(m)[1]) })
	}
	return out
}

// Render writes `.env` from the template and the secrets' values (see the top of this file).
// References without a value are an error naming them ("unresolved: A, B"); a value compose
// cannot carry unchanged is an error naming its variable. Errors never carry a value.
func Render(tpl []byte, values map[string]string) ([]byte, error) {
	t, err := ParseEnvTemplate(tpl)
	if err != nil {
		return nil, fmt.Errorf("render %w", err)
	}
	var bad []string
	unresolved := map[string]bool{}
	for _, n := range References(tpl) {
		v, ok := values[n]
		if !ok {
			unresolved[n] = true
		} else if why := uncarried(v); why != "" {
			bad = append(bad, n+" "+why)
		}
	}
	if len(bad) > 0 {
		return nil, fmt.Errorf("render %s: compose cannot carry the value of %s unchanged", TemplateFile, strings.Join(bad, "; "))
	}
	if len(unresolved) > 0 {
		names := make([]string, 0, len(unresolved))
		for n := range unresolved {
			names = append(names, n)
		}
		sort.Strings(names)
		return nil, fmt.Errorf("render %s: unresolved: %s", TemplateFile, strings.Join(names, ", "))
	}
	re := t.markerRE()
	var out strings.Builder
	for _, k := range t.Keys() {
		v := re.ReplaceAllStringFunc(t.values[k], func(m string) string {
			name := re.FindStringSubmatch(m)[1]
			return values[name]
		})
		out.WriteString(k)
		out.WriteByte('=')
		out.WriteString(envQuote(v))
		out.WriteByte('\n')
	}
	return []byte(out.String()), nil
}

// envQuote writes v so that compose-go's dotenv parser returns exactly v: unquoted when every
// byte is one it keeps as is, else double-quoted with `\` → `\\`, `"` → `\"`, `$` → `$$`
// (inside double quotes the parser unescapes `\\` and `\"`, then reads `$$` as a literal `$`;
// every other byte, line breaks included, is kept).
func envQuote(v string) string {
	plain := v != ""
	for i := 0; i < len(v) && plain; i++ {
		c := v[i]
		plain = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			strings.IndexByte("_-./:@%+,=", c) >= 0
	}
	if plain {
		return v
	}
	var b strings.Builder
	b.Grow(len(v) + 8)
	b.WriteByte('"')
	for i := 0; i < len(v); i++ {
		switch c := v[i]; c {
		case '\\':
			b.WriteString(`\\`)
		case '"':
			b.WriteString(`\"`)
		case '$':
			b.WriteString("$$")
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}
