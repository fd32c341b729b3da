package tenancy

import (
	"strings"
	"testing"

	"github.com/tikali/monky-deployd/internal/bundle"
	"github.com/tikali/monky-deployd/internal/vocab"
)

// FuzzDecodeCheckin feeds arbitrary bytes to the decoders of tenancy's answers: they must never
// panic, and an accepted check-in has one of the three actions.
func FuzzDecodeCheckin(f *testing.F) {
	f.Add([]byte(checkinAnswer))
	f.Add([]byte(`{"action":"none"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeCheckin(b)
		if err == nil {
			switch r.Action {
			case vocab.ActionApply, vocab.ActionNone, vocab.ActionDown:
			default:
				t.Fatalf("accepted action %q", r.Action)
			}
			if r.Action == vocab.ActionApply && (r.DesiredSha == "" || r.BundleURL == "") {
				t.Fatalf("accepted apply without sha or url: %+v", r)
			}
			if r.DesiredSha != "" && !bundle.ValidSha(r.DesiredSha) {
				t.Fatalf("accepted desired_sha %q", r.DesiredSha)
			}
		} else if strings.ContainsAny(err.Error(), "\x1b\x00\r\n") {
			t.Fatalf("the error carries raw control characters: %q", err.Error())
		}
		if l, err := decodeLease(b); err == nil && l.LoginJWT == "" {
			t.Fatal("accepted a lease without login_jwt")
		}
		decodeErrorBody(b)
	})
}
