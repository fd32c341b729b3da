package states_test

import (
	"testing"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/internal/vocab"
	"github.com/tikali/monky-deployd/machine/explain"
)

// A pull that no retry can help needs a person from its first tick, on every surface: the
// failure's reason, explain's verdict, status's and the report's why. A registry that cannot
// be reached is working on it (until stuck_after_s).
func TestPullARetryCannotHelpNeedsAPersonOnItsFirstTick(t *testing.T) {
	for _, c := range []struct {
		name, stderr string
		reason       vocab.Reason
		verdict      string
	}{
		{"the registry refuses the credential", "Error response from daemon: Head \"https://harbor.example/v2/monky/api/manifests/1\": no basic auth credentials", vocab.ReasonRegistryDenied, explain.NeedsPerson},
		{"pull access denied", "Error response from daemon: pull access denied for monky/api, repository does not exist or may require 'docker login': denied: requested access to the resource is denied", vocab.ReasonRegistryDenied, explain.NeedsPerson},
		{"the tag does not exist", "Error response from daemon: manifest for harbor.example/monky/api:v9 not found: manifest unknown", vocab.ReasonImageMissing, explain.NeedsPerson},
		{"the registry is unreachable", "Error response from daemon: Get \"https://harbor.example/v2/\": dial tcp 10.0.0.9:443: i/o timeout", vocab.ReasonNetwork, explain.Working},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			h.release("v1", nil)
			h.dockerKnob("pull-error", c.stderr)
			h.wantExit(h.tick(), 1)
			rec := h.record()
			if rec.Failure == nil || rec.Failure.Code != vocab.ComposePullFailed || rec.Failure.Reason != c.reason {
				t.Fatalf("failure %+v, want %s/%s", rec.Failure, vocab.ComposePullFailed, c.reason)
			}
			doc, err := explain.Build(h.st, explain.Options{Now: h.clock.Now()})
			if err != nil {
				t.Fatal(err)
			}
			if doc.Verdict != c.verdict {
				t.Errorf("explain's verdict %s, want %s (why %+v)", doc.Verdict, c.verdict, doc.Why)
			}
			st, err := explain.BuildStatus(h.st, h.clock.Now(), nil)
			if err != nil {
				t.Fatal(err)
			}
			if st.Verdict != c.verdict {
				t.Errorf("status's verdict %s, want %s", st.Verdict, c.verdict)
			}
			reps := h.sim.Reports(env)
			if len(reps) == 0 || reps[len(reps)-1].Why == nil {
				t.Fatalf("no failed report with a why")
			}
			want := effects.VerdictWorking
			if c.verdict == explain.NeedsPerson {
				want = effects.VerdictNeedsPerson
			}
			if w := reps[len(reps)-1].Why; w.Verdict != want || w.Code != string(vocab.ComposePullFailed) {
				t.Errorf("the report's why %+v, want %s", w, want)
			}
		})
	}
}
