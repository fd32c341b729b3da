package redact

import (
	"strings"
	"testing"
)

// FuzzString: String never panics, never lets a registered value through in any case, and leaves text
// without secrets or token shapes untouched.
func FuzzString(f *testing.F) {
	const secret = "Zq9-canary-Xw"
	for _, s := range []string{"", "plain text", "Authorization: Bearer ", "X-Vault-Token:", "hvs.", "s.",
		"eyJ.eyJ.", jwt, hvs, "a" + secret + "b", "authorization=\"basic",
		"api-1  | Zq9-can\napi-1  | ary-Xw", `\u005aq9-CANARY\r\n-xw`, "x | Zq9 | y\r\n\\\\u"} {
		f.Add(s)
	}
	r := New()
	r.Add(secret)
	f.Fuzz(func(t *testing.T, in string) {
		out := r.String(in)
		if strings.Contains(strings.ToLower(out), strings.ToLower(secret)) {
			t.Fatalf("secret survived: %q → %q", in, out)
		}
		if !strings.Contains(out, Mask) && out != in {
			t.Fatalf("changed without masking: %q → %q", in, out)
		}
	})
}
