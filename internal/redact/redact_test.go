package redact

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/tikali/monky-deployd/internal/sanitize"
)

const (
	hvs = "hvs.CAESIJ7x2kq9Lm0pQrStUvWxYz_-AbCdEfGh"
	jwt = "eyJhbGciOiJFUzI1NiIsInR5cCI6IkpXVCJ9.eyJlbnZfaWQiOiJlbnYtcWEtMDIiLCJqdGkiOiJ4In0.MEUCIQDx-_abc123"
)

func TestShapes(t *testing.T) {
	cases := []struct{ in, want string }{
		{"token " + hvs + " ok", "token [REDACTED] ok"},
		{"hvb.AAAAAQJ_abcdefgh-xyz", "[REDACTED]"},
		{"token=hvr.Abcdefgh123", "token=[REDACTED]"},
		{"hvs.short", "hvs.short"},
		{"legacy s.AbCdEfGhIjKlMnOpQrStUvWx done", "legacy [REDACTED] done"},
		{"(b.0123456789abcdefghijXYZ)", "([REDACTED])"},
		{"r.0123456789abcdefghij", "[REDACTED]"},
		{"ordinary words: s.t, b.txt, e.g. a.b.c, is.AbCdEfGhIjKlMnOpQrStUvWx", "ordinary words: s.t, b.txt, e.g. a.b.c, is.AbCdEfGhIjKlMnOpQrStUvWx"},
		{"file releases.tar.gz and cbs.tikali.net", "file releases.tar.gz and cbs.tikali.net"},
		{"s.short0123456789", "s.short0123456789"},
		{"grant " + jwt + " end", "grant [REDACTED] end"},
		{`{"login_jwt":"` + jwt + `"}`, `{"login_jwt":"[REDACTED]"}`},
		{"unsigned eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0. tail", "unsigned [REDACTED] tail"},
		{"eyJ alone, eyJhbGciOiJ without dots", "eyJ alone, eyJhbGciOiJ without dots"},
		{"Authorization: Bearer abc.DEF-123 next", "Authorization: Bearer [REDACTED] next"},
		{"authorization: bearer x", "authorization: bearer [REDACTED]"},
		{`"Authorization":"Bearer tok3n"`, `"Authorization":"Bearer [REDACTED]"`},
		{`map[Authorization:[Bearer tok3n] Accept:[json]]`, `map[Authorization:[Bearer [REDACTED]] Accept:[json]]`},
		{`{"msg":"sent \"Authorization\":\"Bearer tok3n\""}`, `{"msg":"sent \"Authorization\":\"Bearer [REDACTED]\""}`},
		{"Authorization: Basic dXNlcjpwYXNz", "Authorization: Basic [REDACTED]"},
		{"Authorization: rawtoken123", "Authorization: [REDACTED]"},
		{"authorization failed for user", "authorization failed for user"},
		{"X-Vault-Token: abcd1234 rest", "X-Vault-Token: [REDACTED] rest"},
		{`map[X-Vault-Token:[whatever]]`, `map[X-Vault-Token:[[REDACTED]]]`},
		{`"x-vault-token": "zzzz"`, `"x-vault-token": "[REDACTED]"`},
		{"missing X-Vault-Token header", "missing X-Vault-Token header"},
		{"", ""},
	}
	r := New()
	for _, tc := range cases {
		if got := r.String(tc.in); got != tc.want {
			t.Errorf("String(%q)\n got %q\nwant %q", tc.in, got, tc.want)
		}
	}
}

func TestRegisteredValuesAndEncodings(t *testing.T) {
	const secret = `pa$$w0rd/with+odd "chars"&<x>`
	r := New()
	r.Add(secret)
	r.Add("abc") // too short: ignored
	if r.Len() != 1 {
		t.Fatalf("Len = %d, want 1", r.Len())
	}
	forms := map[string]string{
		"raw":         secret,
		"b64":         base64.StdEncoding.EncodeToString([]byte(secret)),
		"b64raw":      base64.RawStdEncoding.EncodeToString([]byte(secret)),
		"b64url":      base64.URLEncoding.EncodeToString([]byte(secret)),
		"hex":         hex.EncodeToString([]byte(secret)),
		"HEX":         strings.ToUpper(hex.EncodeToString([]byte(secret))),
		"query":       url.QueryEscape(secret),
		"path":        url.PathEscape(secret),
		"json":        mustJSON(secret),
		"in-b64-off1": base64.StdEncoding.EncodeToString([]byte("u:" + secret + "!")),
		"in-b64-off2": base64.StdEncoding.EncodeToString([]byte("us:" + secret + "!!")),
		"in-b64-off0": base64.URLEncoding.EncodeToString([]byte("usr:" + secret)),
	}
	for name, f := range forms {
		in := "before " + f + " after"
		got := r.String(in)
		if !strings.Contains(got, Mask) {
			t.Errorf("%s: nothing masked in %q", name, got)
		}
		// Of the encoded form, only the characters that encode the neighbours (or a boundary
		// character mixing both) may survive: none for a bare form, a handful inside a longer text.
		visible := len(got) - len(Mask) - len("before  after")
		limit := 0
		if strings.HasPrefix(name, "in-b64") {
			limit = 10 // e.g. "dXM6" + "hIQ==": the neighbours and the padding
		}
		if visible > limit || strings.Count(got, Mask) != 1 {
			t.Errorf("%s: %d characters of %q survive in %q", name, visible, f, got)
		}
	}
	if got := r.String("abc and abcd"); got != "abc and abcd" {
		t.Errorf("short value masked: %q", got)
	}
}

func mustJSON(s string) string {
	b, _ := json.Marshal(s)
	return string(b[1 : len(b)-1])
}

// Overlapping registered values are masked as one span: neither leaks a tail.
func TestOverlappingValues(t *testing.T) {
	r := New()
	r.Add("abcdXY12")
	r.Add("XY12zzzz")
	if got := r.String("[abcdXY12zzzz]"); got != "["+Mask+"]" {
		t.Errorf("got %q", got)
	}
}

func TestWriterNeverLeaksACanarySplitAcrossWrites(t *testing.T) {
	const canary = "CANARY-7d1f0c2e9b"
	r := New()
	r.Add(canary)
	var out bytes.Buffer
	w := r.Writer(&out)
	line := "level=info value=" + canary + " msg=done\n"
	for cut := 1; cut < len(line)-1; cut++ {
		out.Reset()
		if _, err := w.Write([]byte(line[:cut])); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(out.String(), "CANARY") {
			t.Fatalf("cut %d: partial line escaped: %q", cut, out.String())
		}
		if _, err := w.Write([]byte(line[cut:])); err != nil {
			t.Fatal(err)
		}
		if want := "level=info value=" + Mask + " msg=done\n"; out.String() != want {
			t.Fatalf("cut %d: got %q want %q", cut, out.String(), want)
		}
	}
	// A token shape split the same way, and a last line without newline written by Flush.
	out.Reset()
	w.Write([]byte("a " + hvs[:6]))
	w.Write([]byte(hvs[6:] + " b\nlast " + canary[:5]))
	w.Write([]byte(canary[5:]))
	if err := w.(*LineWriter).Close(); err != nil {
		t.Fatal(err)
	}
	if want := "a " + Mask + " b\nlast " + Mask; out.String() != want {
		t.Fatalf("got %q want %q", out.String(), want)
	}
}

func TestConcurrentUse(t *testing.T) {
	r := New()
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				s := fmt.Sprintf("secret-%d-%d", g, i)
				r.Add(s)
				if got := r.String("x " + s + " y"); got != "x "+Mask+" y" {
					t.Errorf("got %q", got)
					return
				}
			}
		}(g)
	}
	wg.Wait()
}

func TestDefault(t *testing.T) {
	Add("default-canary-42")
	if got := String("v=default-canary-42"); got != "v="+Mask {
		t.Errorf("got %q", got)
	}
	if got := string(Default.Bytes([]byte("plain"))); got != "plain" {
		t.Errorf("Bytes changed plain text: %q", got)
	}
}

func BenchmarkString(b *testing.B) {
	r := New()
	for i := 0; i < 50; i++ {
		r.Add(fmt.Sprintf("s3cr3t-value-%02d-%x", i, i*7919))
	}
	var sb strings.Builder
	for sb.Len() < 4096 {
		sb.WriteString(`{"level":"info","state":"Pulled","sha":"7a10c2e4f1","ms":41,"message":"compose pull: image harbor.tikali.net/monky/app:1.2.3 up to date; s.t b.txt"} `)
	}
	line := sb.String()[:4096]
	b.SetBytes(int64(len(line)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		_ = r.String(line)
	}
}

// A secret of several lines, printed by a service and relayed by compose with the service's
// prefix on every line, is masked line by line: no line of it survives.
func TestMultiLineSecretMaskedThroughLogPrefixes(t *testing.T) {
	r := New()
	secret := "-----BEGIN KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\r\nbKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj\n-----END KEY-----"
	r.Add(secret)
	out := "api-1  | loading key\napi-1  | -----BEGIN KEY-----\napi-1  | MIIEvQIBADANBgkqhkiG9w0BAQEFAASC\r\n" +
		"worker-1  | unrelated\napi-1  | bKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj\napi-1  | -----END KEY-----\n"
	got := r.String(out)
	for _, line := range []string{"MIIEvQIBADANBgkqhkiG9w0BAQEFAASC", "bKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj", "BEGIN KEY", "END KEY"} {
		if strings.Contains(got, line) {
			t.Errorf("a line of the secret survives: %q in\n%s", line, got)
		}
	}
	for _, keep := range []string{"api-1  | loading key", "worker-1  | unrelated", "api-1  | [REDACTED]"} {
		if !strings.Contains(got, keep) {
			t.Errorf("lost %q:\n%s", keep, got)
		}
	}
}

// JSON masks string values whatever escapes they take, keeps keys, order and other values, and
// keeps the document valid JSON; what is not JSON is masked as text.
func TestJSON(t *testing.T) {
	r := New()
	const secret = `p<a"ss\w0rd`
	r.Add(secret)
	v := map[string]any{"detail": "x " + secret + " y", "list": []any{secret, 1.5, true, nil}, "secret": "plain"}
	raw, _ := json.Marshal(v)
	out := r.JSON(raw)
	var got map[string]any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if got["detail"] != "x "+Mask+" y" || got["secret"] != "plain" {
		t.Errorf("got %s", out)
	}
	l, _ := got["list"].([]any)
	if len(l) != 4 || l[0] != Mask || l[1] != 1.5 || l[2] != true || l[3] != nil {
		t.Errorf("list = %v", got["list"])
	}
	if strings.Index(string(out), `"detail"`) > strings.Index(string(out), `"list"`) {
		t.Errorf("member order changed: %s", out)
	}
	plain := []byte(`{"b":1,"a":"words"}`)
	if same := r.JSON(plain); &same[0] != &plain[0] {
		t.Errorf("nothing to mask: got a copy %s", same)
	}
	if got := string(r.JSON([]byte(`{"a":"` + secret))); got != `{"a":"`+Mask {
		t.Errorf("a broken document, masked as text: %q", got)
	}
	if got := r.JSON(nil); len(got) != 0 {
		t.Errorf("nothing became %q", got)
	}
}

// A secret is masked in every escaped form the agent's writers give it: a call site that escapes
// control characters (sanitize.Line of an error, %q, strconv.Quote) before the text reaches a
// sink, and a sink that writes JSON (the logger, the store) of text already escaped.
func TestEscapedForms(t *testing.T) {
	jsonNoHTML := func(s string) string {
		var b bytes.Buffer
		e := json.NewEncoder(&b)
		e.SetEscapeHTML(false)
		_ = e.Encode(s)
		v := strings.TrimSpace(b.String())
		return v[1 : len(v)-1]
	}
	escapers := map[string]func(string) string{
		"line":             sanitize.Line,
		"text":             sanitize.Text,
		"quote":            func(s string) string { q := strconv.Quote(s); return q[1 : len(q)-1] },
		"quoteASC":         func(s string) string { q := strconv.QuoteToASCII(s); return q[1 : len(q)-1] },
		"%q":               func(s string) string { q := fmt.Sprintf("%q", s); return q[1 : len(q)-1] },
		"%+q":              func(s string) string { q := fmt.Sprintf("%+q", s); return q[1 : len(q)-1] },
		"json":             mustJSON,
		"jsonNoHTML":       jsonNoHTML,
		"json(line)":       func(s string) string { return mustJSON(sanitize.Line(s)) },
		"jsonNoHTML(line)": func(s string) string { return jsonNoHTML(sanitize.Line(s)) },
		"json(quote)":      func(s string) string { q := strconv.Quote(s); return mustJSON(q[1 : len(q)-1]) },
		"line(json)":       func(s string) string { return sanitize.Line(mustJSON(s)) },
		// the resolved model's forms: every $ doubled, YAML's escaping, and both
		"dollar":       func(s string) string { return strings.ReplaceAll(s, "$", "$$") },
		"yaml":         yamlValue,
		"yaml(dollar)": func(s string) string { return yamlValue(strings.ReplaceAll(s, "$", "$$")) },
		"lower":        strings.ToLower,
	}
	for _, secret := range []string{
		"tab\tin-the-middle",
		"cr\rand\x1besc-z9",
		`quote"and\backslash`,
		"bidi\u202eswapped-<tag>&",
		"two\tlines\nof secret",
		"pa$$word'with$x-Z9",
		"esc\x1b[31m$HOME-and-'quote'",
		"- starts-like-yaml: $x",
	} {
		r := New()
		r.Add(secret)
		for name, esc := range escapers {
			f := esc(secret)
			in := "before " + f + " after"
			got := r.String(in)
			if got != "before "+Mask+" after" {
				t.Errorf("%q as %s (%q): got %q", secret, name, f, got)
			}
		}
	}
}

// yamlValue is s as the YAML encoder writes it as a mapping's value (the resolved model),
// quotes aside.
func yamlValue(s string) string {
	out, err := yaml.Marshal(map[string]string{"k": s})
	if err != nil {
		panic(err)
	}
	v := strings.TrimSuffix(strings.TrimPrefix(string(out), "k: "), "\n")
	if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') {
		v = v[1 : len(v)-1]
	}
	return v
}

// The forms a value takes in compose's output and the agent's escapes that are no fixed
// encoding of it: cut by a line break (with compose's prefix on the next line, or as the
// logger's JSON writes the break), re-cased, or written in JSON `\u` escapes. Each form is
// masked whole, the text around it (the break, the prefix) stays, and nothing of the value
// survives in any case.
func TestFormsASecretCanTake(t *testing.T) {
	const secret = "S3cretValue-9xQ"
	u := func(s string) string { // every character as a `\uXXXX` escape
		var b strings.Builder
		for _, r := range s {
			fmt.Fprintf(&b, `\u%04x`, r)
		}
		return b.String()
	}
	cases := []struct{ name, in, want string }{
		{"split line", "v=S3cret\nValue-9xQ done", "v=" + Mask + "\n" + Mask + " done"},
		{"split with compose prefix", "api-1  | S3cretVa\napi-1  | lue-9xQ\n",
			"api-1  | " + Mask + "\napi-1  | " + Mask + "\n"},
		{"CRLF", "S3cr\r\netValue-9xQ", Mask + "\r\n" + Mask},
		{"escaped break in a JSON log line", `{"msg":"api-1  | S3cretVal\napi-1  | ue-9xQ"}`,
			`{"msg":"api-1  | ` + Mask + `\napi-1  | ` + Mask + `"}`},
		{"lines joined by docker.Meaningful", "api-1  | S3cret | api-1  | Value-9xQ",
			"api-1  | " + Mask + " | api-1  | " + Mask},
		{"re-cased", "v=s3CRETvalue-9Xq.", "v=" + Mask + "."},
		{"upper-cased", "V=S3CRETVALUE-9XQ", "V=" + Mask},
		{`\u escapes whole`, `"` + u(secret) + `"`, `"` + Mask + `"`},
		{`\u escapes partial`, `"\u0053\u0033cret` + `Value\u002d9xQ"`, `"` + Mask + `"`},
		{`\u escapes upper-case hex, re-cased`, `x \u0073\u0033CRETVALUE-9xq y`, "x " + Mask + " y"},
		{`\u escapes twice (JSON of JSON)`, `x \\u0053\\u0033cretValue-9xQ y`, "x " + Mask + " y"},
		{`\u escapes and a split`, `S3cret\u0056a\nlue-9xQ`, Mask + `\n` + Mask},
	}
	// json.Marshal escapes <, > and & alone; a program may escape one of them, or more.
	const html = "tok<en>&x-77"
	for _, f := range []string{`tok\u003cen>&x-77`, `tok<en\u003e&X-77`, `TOK\u003CEN\u003E\u0026X-77`, u(html)} {
		cases = append(cases, struct{ name, in, want string }{`\u escapes of <>&`, "a " + f + " b", "a " + Mask + " b"})
	}
	r := New()
	r.Add(secret)
	r.Add(html)
	for _, tc := range cases {
		got := r.String(tc.in)
		if got != tc.want {
			t.Errorf("%s: String(%q)\n got %q\nwant %q", tc.name, tc.in, got, tc.want)
		}
	}
}

// A fragment of a value is masked only where the rest of the value follows it: alone, at the
// end of a line or next to a prefix, it is ordinary text.
func TestFragmentsAloneStay(t *testing.T) {
	r := New()
	r.Add("S3cretValue-9xQ")
	for _, in := range []string{
		"S3cret\nother words",
		"api-1  | S3cret\napi-1  | Value\n",
		"Value-9xQ alone",
		`\u0053\u0033cret and more`,
		"s3cretvalue-9x", // one character short
	} {
		if got := r.String(in); got != in {
			t.Errorf("String(%q) = %q, want it unchanged", in, got)
		}
	}
}

// A value of several lines printed through compose is also masked whole across its breaks.
func TestMultiLineSecretMaskedWholeAcrossPrefixes(t *testing.T) {
	r := New()
	r.Add("ab1\ncd2\nef3") // no line is long enough to be a value of its own
	in := "api-1  | ab1\napi-1  | cd2\napi-1  | ef3\n"
	want := "api-1  | " + Mask + "\napi-1  | " + Mask + "\napi-1  | " + Mask + "\n"
	if got := r.String(in); got != want {
		t.Errorf("got %q\nwant %q", got, want)
	}
}

// BenchmarkStringLines is String on the logger's JSON lines that hold compose's output: escaped
// breaks, compose's prefixes and `\u003c` escapes, the canonical pass's worst ordinary case.
func BenchmarkStringLines(b *testing.B) {
	r := New()
	for i := 0; i < 50; i++ {
		r.Add(fmt.Sprintf("s3cr3t-value-%02d-%x", i, i*7919))
	}
	var sb strings.Builder
	for sb.Len() < 4096 {
		sb.WriteString(`{"level":"error","msg":"compose up: api-1  | Listening on :8080\napi-1  | GET /health \u003c200\u003e\r\napi-1  | done"} `)
	}
	line := sb.String()[:4096]
	b.SetBytes(int64(len(line)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		_ = r.String(line)
	}
}
