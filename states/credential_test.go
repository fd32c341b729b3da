package states_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/internal/vocab"
	"github.com/tikali/monky-deployd/machine/explain"
	"github.com/tikali/monky-deployd/states"
)

// crlfBao answers every login with a token that holds a CR/LF.
type crlfBao struct{ effects.Bao }

func (b crlfBao) Login(ctx context.Context, mount, role, jwt string) (effects.Token, error) {
	t, err := b.Bao.Login(ctx, mount, role, jwt)
	t.Value += "\r\nX-Injected: 1"
	return t, err
}

// A token answer with CR/LF is refused before it is stored: the tick exits 1 saying why, the
// grant stays for the next tick, and that tick (with a sane answer) converges. It used to be
// stored, and every later tick exited 1 with "invalid header field value".
func TestTokenAnswerWithCRLFIsNotStored(t *testing.T) {
	h := newHarness(t)
	h.release("v1", nil)
	a := h.agent()
	a.Fx.Bao = crlfBao{a.Fx.Bao}
	res := a.Tick(context.Background())
	h.wantExit(res.Exit, 1)
	if res.Err == nil || !strings.Contains(res.Err.Error(), "not printable ASCII") || strings.Contains(res.Err.Error(), "X-Injected") {
		t.Errorf("error %v", res.Err)
	}
	h.wantGone(h.cfg.TokenPath(), "the token was stored")
	if _, err := os.Stat(h.cfg.BootstrapPath); err != nil {
		t.Errorf("the grant was consumed: %v", err)
	}
	h.wantConverged("the tick after")
}

// A token file an older agent wrote with a CR/LF inside is dropped, not sent.
func TestStoredTokenWithCRLFIsDropped(t *testing.T) {
	h := newHarness(t)
	h.apply("v1")
	if err := os.WriteFile(h.cfg.TokenPath(), []byte("s.abc\r\nX-Injected: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	h.freshGrant()
	h.wantExit(h.tick(), 0)
	tok, _ := os.ReadFile(h.cfg.TokenPath())
	if strings.Contains(string(tok), "X-Injected") {
		t.Errorf("token kept")
	}
}

// badLeaseTenancy answers every lease with a login_jwt that holds a CR/LF.
type badLeaseTenancy struct{ effects.Tenancy }

func (t badLeaseTenancy) Lease(ctx context.Context, token, envID, reason string) (effects.Lease, error) {
	l, err := t.Tenancy.Lease(ctx, token, envID, reason)
	l.LoginJWT += "\r\nX-Injected: 1"
	return l, err
}

// A credential that is not one says whose it was, by its typed reason: OpenBao's login answer
// sends the person to bao.addr on this box, tenancy's lease to tenancy's operators (who must act:
// tenancy) with no command on the box. Neither sends anyone to the evidence to learn which.
func TestACredentialShapeSaysWhoseItWas(t *testing.T) {
	for _, c := range []struct {
		name       string
		wrap       func(a *states.Agent)
		reason     vocab.Reason
		fault, fix string
		who        string
	}{
		{"OpenBao's login answer", func(a *states.Agent) { a.Fx.Bao = crlfBao{a.Fx.Bao} }, vocab.ReasonBaoAnswerShape,
			"the token in OpenBao's login answer", "grep -A3 '^bao:' ", explain.WhoBox},
		{"tenancy's lease", func(a *states.Agent) { a.Fx.Tenancy = badLeaseTenancy{a.Fx.Tenancy} }, vocab.ReasonLeaseShape,
			"the login_jwt in tenancy's lease", vocab.NoCommand, explain.WhoTenancy},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			h.release("v1", nil) // the first apply leases
			a := h.agent()
			c.wrap(a)
			res := a.Tick(context.Background())
			h.wantExit(res.Exit, 1)
			if r := effects.ReasonOf(res.Err); r != c.reason {
				t.Errorf("the error's reason %q, want %q (%v)", r, c.reason, res.Err)
			}
			doc, err := explain.Build(h.st, explain.Options{Now: h.clock.Now()})
			if err != nil || doc.Why == nil {
				t.Fatalf("explain: %v %+v", err, doc.Why)
			}
			w := doc.Why
			if w.Code != vocab.CredentialShape || w.Reason != c.reason || !strings.Contains(w.Fault, c.fault) || !strings.HasPrefix(w.Fix, c.fix) || w.Who != c.who {
				t.Errorf("why: code %s reason %s who %s\nfault %s\nfix %s", w.Code, w.Reason, w.Who, w.Fault, w.Fix)
			}
			if strings.Contains(w.Fault+w.Fix, "evidence") {
				t.Errorf("sends the person to the evidence: %s / %s", w.Fault, w.Fix)
			}
		})
	}
}
