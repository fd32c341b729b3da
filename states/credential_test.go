package states_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/tikali/monky-deployd/effects"
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
