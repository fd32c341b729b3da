package states_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/machine/explain"
	"github.com/tikali/monky-deployd/store"
)

// explainWhy is what `explain --json` says now, as its why block.
func (h *harness) explainWhy() *explain.Why {
	h.t.Helper()
	doc, err := explain.Build(h.st, explain.Options{Now: h.clock.Now(), Limits: explain.LimitsOf(h.cfg)})
	if err != nil {
		h.t.Fatal(err)
	}
	return doc.Why
}

// wantReportWhy checks that the last report tenancy received is failed and carries the why
// `explain --json` prints, with verdict.
func (h *harness) wantReportWhy(verdict string) {
	h.t.Helper()
	reps := h.sim.Reports(env)
	if len(reps) == 0 {
		h.t.Fatal("no report")
	}
	r := reps[len(reps)-1]
	w := h.explainWhy()
	if r.Result != effects.ResultFailed || r.Why == nil || w == nil {
		h.t.Fatalf("report %s why %+v; explain's why %+v", r.Result, r.Why, w)
	}
	want := effects.ReportWhy{Code: string(w.Code), Reason: string(w.Reason), Verdict: verdict, Since: w.At.UTC().Format(time.RFC3339),
		Fault: w.Fault, Evidence: w.Evidence, Next: w.Next, Fix: w.Fix}
	if *r.Why != want {
		h.t.Errorf("report's why\n %+v\nexplain's\n %+v", *r.Why, want)
	}
	// the control plane's fleet shows the box as explain does
	rows := h.sim.Fleet(false)
	if len(rows) != 1 || rows[0].Env != env || rows[0].Verdict != verdict || rows[0].Code != string(w.Code) || rows[0].Since != want.Since || rows[0].Next != w.Next {
		h.t.Errorf("fleet rows %+v, want %s %s %s", rows, env, verdict, w.Code)
	}
}

// A refused, a failed, an unhealthy and a parked box each send a report whose why is the one
// `explain --json` prints; an applied report carries none.
func TestAFailedReportCarriesExplainsWhy(t *testing.T) {
	cases := []struct {
		name, code, verdict string
		run                 func(h *harness)
	}{
		{"refused", "PRIVILEGED_REFUSED", effects.VerdictNeedsPerson, func(h *harness) {
			h.release("v1", func(f map[string][]byte) {
				f["compose.yaml"] = []byte("services:\n  api:\n    image: harbor.example/monky/api:v1\n    privileged: true\n")
			})
			h.wantExit(h.tick(), 1)
		}},
		{"failed", "COMPOSE_PULL_FAILED", effects.VerdictWorking, func(h *harness) {
			// a registry that does not answer: a retry may help, so working on it
			h.release("v1", nil)
			h.dockerKnob("pull-error", "Error response from daemon: Get \"https://harbor.example/v2/\": dial tcp 10.0.0.9:443: i/o timeout")
			h.wantExit(h.tick(), 1)
		}},
		{"failed for good", "COMPOSE_PULL_FAILED", effects.VerdictNeedsPerson, func(h *harness) {
			// the registry refuses the credential: no retry can help, a person at once
			h.release("v1", nil)
			h.dockerKnob("pull-error", "Error response from daemon: no basic auth credentials")
			h.wantExit(h.tick(), 1)
		}},
		{"unhealthy", "UNHEALTHY", effects.VerdictNeedsPerson, func(h *harness) {
			h.apply("v1")
			h.dockerKnob("unhealthy", "api\n")
			h.wantExit(h.tick(), 1)
		}},
		{"parked", "COMPOSE_PULL_FAILED", effects.VerdictNeedsPerson, func(h *harness) {
			h.release("v1", nil)
			h.dockerKnob("pull-error", "Error response from daemon: manifest for harbor.example/monky/api:v1 not found: manifest unknown")
			h.failedTicks(4, 16*time.Minute)
			h.wantExit(h.tick(), 1)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			c.run(h)
			h.wantReportWhy(c.verdict)
			if w := h.explainWhy(); string(w.Code) != c.code {
				t.Errorf("code %s, want %s", w.Code, c.code)
			}
			for _, r := range h.sim.Reports(env) {
				if r.Result != effects.ResultFailed && r.Why != nil {
					t.Errorf("an %s report carries a why: %+v", r.Result, r.Why)
				}
			}
		})
	}
}

// A failed report tenancy does not take keeps its why in the outbox, and a later tick (a new
// process) sends that same why.
func TestTheOutboxKeepsTheWhy(t *testing.T) {
	h := newHarness(t)
	h.apply("v1")
	h.sim.Fail(simFail("/v1/agent/report", 503, "", ""))
	h.dockerKnob("unhealthy", "api\n")
	h.tick()
	var queued []store.QueuedReport
	if err := h.st.View(func(tx store.Tx) error {
		var err error
		queued, err = tx.Outbox()
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if len(queued) != 1 {
		t.Fatalf("%d queued reports, want 1", len(queued))
	}
	var kept effects.Report
	if err := json.Unmarshal(queued[0].Body, &kept); err != nil {
		t.Fatal(err)
	}
	if kept.Why == nil || kept.Why.Code != "UNHEALTHY" {
		t.Fatalf("the queued report's why: %+v", kept.Why)
	}
	h.sim.ClearFails()
	h.reload() // a new process
	h.tick()
	var sent *effects.ReportWhy
	for _, r := range h.sim.Reports(env) {
		if r.Result == effects.ResultFailed && sent == nil {
			sent = r.Why
		}
	}
	if sent == nil || *sent != *kept.Why {
		t.Errorf("sent why %+v, want the kept %+v", sent, kept.Why)
	}
}
