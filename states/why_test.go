package states

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tikali/monky-deployd/effects"
)

// The whole report stays within 8 KiB: evidence, then fix, are cut ending "…"; code, verdict,
// since, fault and next never are; a secret's shape is masked; an applied report carries none.
func TestWithWhyCutsToPROTOCOLsSizes(t *testing.T) {
	cs := make([]effects.Container, 25)
	for i := range cs {
		cs[i] = effects.Container{Name: strings.Repeat("c", 60), Service: "svc", State: "running", Health: "healthy"}
	}
	rep := effects.Report{EnvID: "env-qa-02", Sha: strings.Repeat("a", 64), Result: effects.ResultFailed,
		Detail: strings.Repeat("d", 1000), LogTail: strings.Repeat("l", 2000), Containers: cs}
	w := &effects.ReportWhy{Code: "UNHEALTHY", Verdict: effects.VerdictNeedsPerson, Since: "2026-12-01T14:02:00Z",
		Fault: "A service is not running and healthy.", Evidence: strings.Repeat("é<&> ", 2000) + "token hvs.CAESIJ0123456789abcdefghij",
		Next: "Checked again at every tick.", Fix: strings.Repeat("docker compose ps ", 300)}
	got := withWhy(rep, w)
	b, _ := json.Marshal(got)
	if len(b) > effects.MaxReportBytes {
		t.Fatalf("report of %d bytes, over %d", len(b), effects.MaxReportBytes)
	}
	g := got.Why
	if !strings.HasSuffix(g.Evidence, "…") || !utf8.ValidString(g.Evidence) {
		t.Errorf("evidence not cut on a rune ending …: %q", g.Evidence[max(0, len(g.Evidence)-20):])
	}
	if g.Code != w.Code || g.Verdict != w.Verdict || g.Since != w.Since || g.Fault != w.Fault || g.Next != w.Next {
		t.Errorf("a field that is never cut changed: %+v", g)
	}
	if w.Evidence == g.Evidence {
		t.Errorf("the caller's why was changed in place")
	}
	short := withWhy(effects.Report{Result: effects.ResultFailed}, &effects.ReportWhy{Evidence: "bearer hvs.CAESIJ0123456789abcdefghij refused"})
	if strings.Contains(short.Why.Evidence, "CAESIJ") {
		t.Errorf("a token's shape went unmasked: %q", short.Why.Evidence)
	}
	if short.Why.Evidence == "" || strings.HasSuffix(short.Why.Evidence, "…") {
		t.Errorf("a report that fits was cut: %q", short.Why.Evidence)
	}
	if a := withWhy(effects.Report{Result: effects.ResultApplied}, w); a.Why != nil {
		t.Errorf("an applied report carries a why")
	}
}
