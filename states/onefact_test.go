package states_test

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
)

type logLine struct {
	Level   string `json:"level"`
	Message string `json:"message"`
	Exit    *int   `json:"exit"`
	State   string `json:"state"`
	Code    string `json:"code"`
}

// tickLines runs one tick and returns its log lines at info or above, and its exit code.
func (h *harness) tickLines() ([]logLine, int) {
	h.t.Helper()
	h.logs.Reset()
	exit := h.tick()
	var out []logLine
	for _, l := range strings.Split(strings.TrimSpace(h.logs.String()), "\n") {
		var ll logLine
		if err := json.Unmarshal([]byte(l), &ll); err != nil {
			h.t.Fatalf("not a log line: %q", l)
		}
		if ll.Level != "debug" {
			out = append(out, ll)
		}
	}
	return out, exit
}

// wordsOf is what a line says, without its "From → To: ", "event: " or "exit N: " head.
var lineHead = regexp.MustCompile(`^([A-Za-z]+ → [A-Za-z]+|exit [0-9]+|[a-z-]+): `)

// wantOneLinePerFact fails when two lines of a tick say the same words.
func wantOneLinePerFact(t *testing.T, name string, lines []logLine) {
	t.Helper()
	for i, a := range lines {
		wa := lineHead.ReplaceAllString(a.Message, "")
		for _, b := range lines[i+1:] {
			wb := lineHead.ReplaceAllString(b.Message, "")
			if len(wa) > 12 && len(wb) > 12 && (strings.Contains(wa, wb) || strings.Contains(wb, wa)) {
				t.Errorf("%s: a fact written twice:\n  %s\n  %s", name, a.Message, b.Message)
			}
		}
	}
}

// One line per fact: no tick writes the same words twice (the check-in and its transition, a
// refusal and the closing line), and a remembered refusal writes one error line a tick — its
// closing line, with the code, the words, the exit and the state.
func TestOneLinePerFact(t *testing.T) {
	h := newHarness(t)
	h.release("v1", nil)
	lines, _ := h.tickLines()
	wantOneLinePerFact(t, "apply", lines)
	lines, _ = h.tickLines()
	wantOneLinePerFact(t, "heartbeat", lines)
	if len(lines) != 1 {
		t.Errorf("a heartbeat wrote %d lines, want 1", len(lines))
	}
	h.apply("v2")
	h.release("v1", nil) // a rollback: refused
	lines, _ = h.tickLines()
	wantOneLinePerFact(t, "refusal", lines)
	for i := 0; i < 3; i++ {
		lines, exit := h.tickLines()
		wantOneLinePerFact(t, "remembered refusal", lines)
		var errs []logLine
		for _, l := range lines {
			if l.Level == "error" {
				errs = append(errs, l)
			}
		}
		if len(errs) != 1 {
			t.Fatalf("a remembered refusal wrote %d error lines in a tick, want 1: %+v", len(errs), errs)
		}
		e := errs[0]
		if exit != 1 || e.Exit == nil || *e.Exit != 1 || e.Code != "ROLLBACK_REFUSED" || e.State != "Refused" || !strings.Contains(e.Message, "was applied on this box before") {
			t.Errorf("the remembered refusal's line: %+v", e)
		}
	}
	h.apply("v3")
	h.dockerKnob("unhealthy", "api\n")
	lines, _ = h.tickLines()
	wantOneLinePerFact(t, "unhealthy heartbeat", lines)
	if lines[len(lines)-1].Level != "error" {
		t.Errorf("an unhealthy heartbeat's closing line is %s, want error (it needs a person)", lines[len(lines)-1].Level)
	}
	h.dockerKnob("unhealthy", "")
	h.sim.Fail(simFail("/v1/agent/checkin", 503, "", ""))
	lines, _ = h.tickLines()
	wantOneLinePerFact(t, "tenancy down", lines)
}
