package credential

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/internal/vocab"
)

var planNow = time.Date(2026, 11, 29, 14, 0, 0, 0, time.UTC)

// jwt is an unsigned grant with the claims jti and exp (0: none).
func jwt(jti string, exp int64) string {
	claims := fmt.Sprintf(`{"jti":%q,"exp":%d}`, jti, exp)
	return "e30." + base64.RawURLEncoding.EncodeToString([]byte(claims)) + ".sig"
}

func TestPlanApply(t *testing.T) {
	live, expired := jwt("k1", planNow.Add(time.Hour).Unix()), jwt("k1", planNow.Add(-time.Hour).Unix())
	for _, c := range []struct {
		name     string
		why      string
		reusable bool
		err      error
		kept     string
		want     Plan
	}{
		{name: "unknown whether the token lives: stop", err: errors.New("503"), kept: live, want: Plan{Stop: true}},
		{name: "a reusable token", why: "token reused", reusable: true, kept: live, want: Plan{Reuse: true, Detail: "token reused"}},
		{name: "a kept grant", kept: live, want: Plan{KeptGrant: true, JTI: "k1", Detail: "a lease's grant kept from an interrupted tick: no new lease"}},
		{name: "a kept grant that expired: a lease", kept: expired, want: Plan{}},
		{name: "nothing: a lease", want: Plan{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := PlanApply(c.why, c.reusable, c.err, c.kept, planNow); got != c.want {
				t.Fatalf("plan %+v, want %+v", got, c.want)
			}
		})
	}
}

// A dropped token's code and reason come from the error that dropped it, never from its words.
func TestDropped(t *testing.T) {
	for _, c := range []struct {
		name   string
		cause  error
		code   vocab.Code
		reason vocab.Reason
	}{
		{"a token that is not a credential", Check("token", "/var/lib/monky-deployd/bao.token", vocab.ReasonShape, "s.a\x07b"), vocab.CredentialShape, vocab.ReasonShape},
		{"OpenBao's refusal", &effects.Error{Op: "bao lookup-self", Status: 403, Code: vocab.BaoPermissionDenied, Msg: "permission denied"}, vocab.BaoPermissionDenied, vocab.ReasonBaoRefused},
		{"tenancy's 401", &effects.Error{Op: "checkin", Kind: effects.Unauthenticated, Status: 401, Code: vocab.AgentUnauthenticated, Msg: "bearer refused"}, vocab.AgentUnauthenticated, vocab.ReasonTenancy401},
		// words that say "not printable" do not make a shape fault: the type does
		{"tenancy's 401 whose words mislead", &effects.Error{Op: "checkin", Kind: effects.Unauthenticated, Status: 401, Msg: "token holds a byte that is not printable ASCII"}, vocab.AgentUnauthenticated, vocab.ReasonTenancy401},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := Dropped(c.cause)
			if d.Code != c.code || d.Reason != c.reason {
				t.Fatalf("dropped %s/%s, want %s/%s", d.Code, d.Reason, c.code, c.reason)
			}
			if BlockCode(d.Reason) == vocab.CredentialShape != (c.reason == vocab.ReasonShape) {
				t.Errorf("block code %s for %s", BlockCode(d.Reason), d.Reason)
			}
		})
	}
}

func TestCheck(t *testing.T) {
	for _, v := range []string{"", "s.a b", "s.a\r\nX: 1", string(make([]byte, MaxBytes+1))} {
		err := Check("token", "the token", vocab.ReasonShape, v)
		if effects.CodeOf(err) != vocab.CredentialShape || effects.ReasonOf(err) != vocab.ReasonShape {
			t.Errorf("%q: %v", v, err)
		}
	}
	if err := Check("token", "the token", vocab.ReasonShape, "s.abcdef"); err != nil {
		t.Errorf("a good token refused: %v", err)
	}
	// a space is called a space, not a byte that is not printable
	if err := Check("token", "the token", vocab.ReasonShape, "s.ab cd"); err == nil || !strings.Contains(err.Error(), "holds a space (0x20 at offset 4)") || strings.Contains(err.Error(), "not printable") {
		t.Errorf("a space: %v", err)
	}
}
