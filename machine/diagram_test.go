package machine

import (
	"bytes"
	"context"
	"flag"
	"os"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the diagram block of ../docs/MACHINE.md from Mermaid()")

const (
	machineDoc    = "../docs/MACHINE.md"
	diagramBegin  = "<!-- diagram:begin -->"
	diagramEnd    = "<!-- diagram:end -->"
	mermaidOpen   = "```mermaid\n"
	mermaidClose  = "```\n"
	notAllowed    = State("not allowed")
	updateCommand = "go test ./machine -run TestDiagramMatchesDocs -update"
)

// diagramBlock is what docs/MACHINE.md holds between the marker lines.
func diagramBlock() string {
	return "\n" + mermaidOpen + Mermaid() + mermaidClose
}

// splitDoc returns the text before the block, the block and the text after it.
func splitDoc(t *testing.T, doc []byte) (before, block, after []byte) {
	t.Helper()
	b := bytes.Index(doc, []byte(diagramBegin))
	e := bytes.Index(doc, []byte(diagramEnd))
	if b < 0 || e < 0 || e < b {
		t.Fatalf("%s: the marker lines %q and %q are missing or out of order", machineDoc, diagramBegin, diagramEnd)
	}
	if bytes.Count(doc, []byte(diagramBegin)) != 1 || bytes.Count(doc, []byte(diagramEnd)) != 1 {
		t.Fatalf("%s: each marker line must appear exactly once", machineDoc)
	}
	start := b + len(diagramBegin)
	return doc[:start], doc[start:e], doc[e:]
}

// TestDiagramMatchesDocs fails when the diagram in docs/MACHINE.md drifts from the transition
// table. With -update it rewrites the block from Mermaid().
func TestDiagramMatchesDocs(t *testing.T) {
	doc, err := os.ReadFile(machineDoc)
	if err != nil {
		t.Fatalf("read %s: %v", machineDoc, err)
	}
	before, block, after := splitDoc(t, doc)
	want := diagramBlock()
	if *update {
		if string(block) == want {
			return
		}
		var out bytes.Buffer
		out.Write(before)
		out.WriteString(want)
		out.Write(after)
		if err := os.WriteFile(machineDoc, out.Bytes(), 0o644); err != nil {
			t.Fatalf("write %s: %v", machineDoc, err)
		}
		t.Logf("rewrote the diagram in %s", machineDoc)
		return
	}
	if string(block) != want {
		t.Errorf("the diagram in %s differs from machine.Mermaid(); run `%s`\n--- docs\n%s\n--- Mermaid()\n%s",
			machineDoc, updateCommand, block, want)
	}
}

func TestMermaidDrawsEveryTransition(t *testing.T) {
	m := Mermaid()
	if !strings.HasPrefix(m, "stateDiagram-v2\n    [*] --> Idle\n") {
		t.Fatalf("Mermaid() does not start with the header and the initial state:\n%s", m)
	}
	for _, ev := range Table {
		for _, src := range ev.Src {
			line := "    " + src + " --> " + ev.Dst + ": " + ev.Name + "\n"
			if !strings.Contains(m, line) {
				t.Errorf("Mermaid() lacks %q", line)
			}
		}
	}
	for _, s := range All {
		if !strings.Contains(m, "    "+string(s)+" --> ") && !strings.Contains(m, " --> "+string(s)+":") {
			t.Errorf("state %s is not drawn", s)
		}
	}
}

// fire runs ev from s through the real fsm and returns the state it leads to, or notAllowed.
func fire(t *testing.T, s State, ev string) State {
	t.Helper()
	f := newFSM(s)
	if !f.Can(ev) {
		return notAllowed
	}
	if err := f.Event(context.WithoutCancel(context.Background()), ev); err != nil {
		t.Fatalf("%s + %s: Can said yes, Event said %v", s, ev, err)
	}
	return State(f.Current())
}

func TestTransitionTable(t *testing.T) {
	tests := []struct {
		from State
		ev   string
		want State
	}{
		// the apply path
		{Idle, EvCheckin, CheckedIn},
		{CheckedIn, EvVerify, BundleVerified},
		{BundleVerified, EvLease, Leased},
		{BundleVerified, EvReuse, LoggedIn},
		{Leased, EvLogin, LoggedIn},
		{LoggedIn, EvStage, Staged},
		{Staged, EvPull, Pulled},
		{Pulled, EvUp, Up},
		{Up, EvHealthy, Healthy},
		{Healthy, EvReport, Reported},
		// refusals before the lease
		{CheckedIn, EvRefuse, Refused},
		{BundleVerified, EvRefuse, Refused},
		{Leased, EvRefuse, notAllowed},
		{Refused, EvRecheck, CheckedIn},
		{Refused, EvCheckin, CheckedIn},
		{Refused, EvResume, Idle},
		{Refused, EvReport, notAllowed},
		// the heartbeat path
		{Reported, EvCheckin, CheckedIn},
		{CheckedIn, EvHealthy, Healthy},
		{CheckedIn, EvFail, Failed},
		{Reported, EvHealthy, notAllowed},
		{Idle, EvHealthy, notAllowed},
		// the retire path
		{CheckedIn, EvDown, Down},
		{Down, EvReport, Reported},
		{Up, EvDown, notAllowed},
		{Idle, EvDown, notAllowed},
		// failures and retries
		{Staged, EvFail, Failed},
		{Up, EvFail, Failed},
		{Healthy, EvFail, notAllowed},
		{Failed, EvReport, Reported},
		{Failed, EvRetry, CheckedIn},
		{Failed, EvCheckin, CheckedIn},
		{Failed, EvResume, Idle},
		{Reported, EvRetry, notAllowed},
		// superseding a flight
		{Staged, EvSupersede, CheckedIn},
		{Down, EvSupersede, CheckedIn},
		{Idle, EvSupersede, notAllowed},
		{Refused, EvSupersede, notAllowed},
		// blocked
		{Blocked, EvUnblock, Idle},
		{Blocked, EvCheckin, notAllowed},
		{Blocked, EvResume, notAllowed},
		{Idle, EvUnblock, notAllowed},
		// no step skips ahead
		{Idle, EvLease, notAllowed},
		{CheckedIn, EvLease, notAllowed},
		{Leased, EvStage, notAllowed},
		{LoggedIn, EvUp, notAllowed},
		{Reported, EvReport, notAllowed},
	}
	for _, tt := range tests {
		t.Run(string(tt.from)+"+"+tt.ev, func(t *testing.T) {
			if got := fire(t, tt.from, tt.ev); got != tt.want {
				t.Errorf("%s + %s = %s, want %s", tt.from, tt.ev, got, tt.want)
			}
		})
	}
}

func TestEveryStateCanBlockExceptBlocked(t *testing.T) {
	for _, s := range All {
		got := fire(t, s, EvBlock)
		if s == Blocked {
			if got != notAllowed {
				t.Errorf("Blocked + block = %s, want not allowed", got)
			}
			continue
		}
		if got != Blocked {
			t.Errorf("%s + block = %s, want Blocked", s, got)
		}
	}
}

func TestEveryStateIsReachableAndLeft(t *testing.T) {
	reached := map[string]bool{string(Idle): true}
	left := map[string]bool{}
	for _, ev := range Table {
		reached[ev.Dst] = true
		for _, src := range ev.Src {
			left[src] = true
			if _, err := Parse(src); err != nil {
				t.Errorf("event %s has an unknown source state: %v", ev.Name, err)
			}
		}
		if _, err := Parse(ev.Dst); err != nil {
			t.Errorf("event %s has an unknown destination: %v", ev.Name, err)
		}
	}
	for _, s := range All {
		if !reached[string(s)] {
			t.Errorf("no event leads to %s", s)
		}
		if !left[string(s)] {
			t.Errorf("no event leaves %s", s)
		}
	}
}

func TestParseRoundTripsEveryState(t *testing.T) {
	if len(All) != 15 {
		t.Errorf("All has %d states, want 15", len(All))
	}
	for _, s := range All {
		got, err := Parse(s.String())
		if err != nil || got != s {
			t.Errorf("Parse(%q) = %q, %v; want %q", s.String(), got, err, s)
		}
	}
	for _, bad := range []string{"", "idle", "IDLE", "Applied", "Healthy ", "Up\n", "Absent"} {
		if got, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) = %q, want an error", bad, got)
		} else if !strings.Contains(err.Error(), "unknown machine state") {
			t.Errorf("Parse(%q) error %q does not say the state is unknown", bad, err)
		}
	}
}

func TestParkedStatesAreRestStates(t *testing.T) {
	rest := map[State]bool{Idle: true, Reported: true, Refused: true, Failed: true, Blocked: true}
	for _, s := range All {
		if s.Rest() != rest[s] {
			t.Errorf("%s.Rest() = %t, want %t", s, s.Rest(), rest[s])
		}
		// in flight is what a new desired sha may supersede, as the table says through the fsm
		if supersede := newFSM(s).Can(EvSupersede); s.InFlight() != supersede {
			t.Errorf("%s.InFlight() = %t, but the table %s supersede from it", s, s.InFlight(), map[bool]string{true: "allows", false: "does not allow"}[supersede])
		}
	}
}
