package states_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tikali/monky-deployd/internal/vocab"
	"github.com/tikali/monky-deployd/machine"
	"github.com/tikali/monky-deployd/machine/explain"
	"github.com/tikali/monky-deployd/machine/metrics"
	"github.com/tikali/monky-deployd/store"
)

// A stored token with a byte that is not printable ASCII is dropped locally: no request
// carries it. The journal, the block and explain's fault say CREDENTIAL_SHAPE — a local shape
// fault — never "bearer refused by tenancy" nor "the grant was superseded or the token
// revoked", which no one said.
func TestMalformedStoredTokenIsCredentialShape(t *testing.T) {
	h := newHarness(t)
	h.apply("v1")
	if err := os.WriteFile(h.cfg.TokenPath(), []byte("s.abc\x07def\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	checkins := h.sim.Counts(env).Checkins
	h.wantExit(h.tick(), 1)
	if got := h.sim.Counts(env).Checkins; got != checkins {
		t.Errorf("a tick with a malformed token checked in %d time(s)", got-checkins)
	}
	h.wantBlocked(vocab.CredentialShape)
	if r := h.record().Block.Reason; r != vocab.ReasonShape {
		t.Errorf("block reason %q, want %q", r, vocab.ReasonShape)
	}
	var dropped *store.Entry
	if err := h.st.View(func(tx store.Tx) error {
		return tx.AllEntries(func(e store.Entry) error {
			if e.Event == machine.NoteUnauthenticated {
				dropped = &e
			}
			return nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	if dropped == nil || dropped.Code != vocab.CredentialShape || dropped.Reason != vocab.ReasonShape {
		t.Fatalf("the journal's entry for the dropped token: %+v", dropped)
	}
	doc, err := explain.Build(h.st, explain.Options{Now: h.clock.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if doc.Why == nil || doc.Why.Code != vocab.CredentialShape {
		t.Fatalf("explain's why %+v, want CREDENTIAL_SHAPE", doc.Why)
	}
	for _, words := range []string{dropped.Detail, h.record().Block.Detail, doc.Why.Fault, doc.Why.Evidence} {
		for _, lie := range []string{"refused by tenancy", "superseded", "revoked"} {
			if strings.Contains(words, lie) {
				t.Errorf("%q says %q: nothing was sent", words, lie)
			}
		}
	}
	if doc.Why.Reason != vocab.ReasonShape {
		t.Errorf("explain's why reason %q", doc.Why.Reason)
	}
	// status and the metrics say the same
	st, err := explain.BuildStatus(h.st, h.clock.Now(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if st.Why == nil || st.Why.Code != vocab.CredentialShape || st.Verdict != explain.NeedsPerson {
		t.Errorf("status: verdict %s why %+v", st.Verdict, st.Why)
	}
	dir := t.TempDir()
	prom := filepath.Join(dir, "monky.prom")
	if err := metrics.Write(prom, filepath.Join(dir, "counters.json"), h.st, metrics.Tick{Exit: 1, EndedAt: h.clock.Now()}); err != nil {
		t.Fatal(err)
	}
	text, _ := os.ReadFile(prom)
	if want := `monky_deployd_why_reason{code="CREDENTIAL_SHAPE",env="` + env + `",reason="local-shape"} 1`; !strings.Contains(string(text), want) {
		t.Errorf("the metrics lack %s:\n%s", want, text)
	}
	// a fresh grant from the kit unblocks, logs in and converges
	h.freshGrant()
	h.wantConverged("after a fresh grant")
}
