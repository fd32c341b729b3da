package redact

import (
	"strings"
	"testing"
)

// FuzzString: String never panics, never lets a registered value through, and leaves text
// without secrets or token shapes untouched.
func FuzzString(f *testing.F) {
	const secret = "Zq9-canary-Xw"
	for _, s := range []string{"", "plain text", "Authorization: Bearer ", "X-Vault-Token:", "hvs.", "s.",
		"eyJ.eyJ.", jwt, hvs, "a" + secret + "b", "authorization=\"basic"} {
		f.Add(s)
	}
	r := New()
	r.Add(secret)
	f.Fuzz(func(t *testing.T, in string) {
		out := r.String(in)
		if strings.Contains(out, secret) {
			t.Fatalf("secret survived: %q → %q", in, out)
		}
		if !strings.Contains(out, Mask) && out != in {
			t.Fatalf("changed without masking: %q → %q", in, out)
		}
	})
}
