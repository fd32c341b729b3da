package states_test

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/internal/vocab"
	"github.com/tikali/monky-deployd/machine/explain"
)

// A desired sha whose bundle tenancy does not serve (404 BUNDLE_NOT_FOUND) is the publisher's
// from its first tick, like a refusal: every surface — status's text and JSON, explain, the
// report's why — says needs_person and the publisher, and the words name the publisher, not
// tenancy's console. The machine still retries by itself: once the bundle is published the
// box applies it.
func TestBundleNotFoundIsThePublishersAtOnce(t *testing.T) {
	h := newHarness(t)
	h.release("v1", nil)
	h.sim.UnpublishRelease(env, "v1")
	h.wantExit(h.tick(), 1)
	rec := h.record()
	if rec.Failure == nil || rec.Failure.Code != vocab.BundleNotFound {
		t.Fatalf("failure %+v, want %s", rec.Failure, vocab.BundleNotFound)
	}

	doc, err := explain.Build(h.st, explain.Options{Now: h.clock.Now(), Limits: explain.LimitsOf(h.cfg)})
	if err != nil {
		t.Fatal(err)
	}
	if doc.Verdict != explain.NeedsPerson || doc.Why == nil || doc.Why.Who != explain.WhoPublisher {
		t.Fatalf("explain: verdict %s why %+v, want needs_person and the publisher", doc.Verdict, doc.Why)
	}
	for _, words := range []string{doc.Why.Fault, doc.Why.Next, doc.Why.Fix} {
		if strings.Contains(words, "tenancy's console") {
			t.Errorf("explain's words name tenancy's console while who is the publisher: %q", words)
		}
	}
	if !strings.Contains(doc.Why.Fault, "publish") || !strings.Contains(doc.Why.Fix, "publish") {
		t.Errorf("explain's fault %q and fix %q do not say the publisher publishes the bundle", doc.Why.Fault, doc.Why.Fix)
	}
	st, err := explain.BuildStatusWith(h.st, h.clock.Now(), nil, explain.LimitsOf(h.cfg))
	if err != nil {
		t.Fatal(err)
	}
	if st.Verdict != explain.NeedsPerson || st.Who != explain.WhoPublisher {
		t.Errorf("status --json: verdict %s who %q, want needs_person publisher", st.Verdict, st.Who)
	}
	var text bytes.Buffer
	explain.WriteStatusText(&text, st)
	if !regexp.MustCompile(`(?m)^who acts +publisher$`).MatchString(text.String()) {
		t.Errorf("status's text does not name the publisher:\n%s", text.String())
	}
	reps := h.sim.Reports(env)
	if len(reps) == 0 || reps[len(reps)-1].Why == nil || reps[len(reps)-1].Why.Verdict != effects.VerdictNeedsPerson {
		t.Errorf("the report's why is not needs_person: %+v", reps)
	}

	// published at last: the next retry fetches it and applies
	if _, err := h.sim.AddRelease(env, "v1", backend("v1")); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 4 && h.record().AppliedSha != rec.Sha; i++ {
		h.tick()
	}
	if got := h.record().AppliedSha; got != rec.Sha {
		t.Errorf("applied %s after the bundle was published, want %s", got, rec.Sha)
	}
}
