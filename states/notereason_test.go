package states_test

import (
	"strings"
	"testing"

	"github.com/tikali/monky-deployd/internal/vocab"
	"github.com/tikali/monky-deployd/machine"
	"github.com/tikali/monky-deployd/store"
)

// A note keeps the typed cause of what it says, like a transition: the check-in that finds a
// sha still refused, or a failure waiting for its backoff, journals the refusal's or the
// failure's reason beside its code, so that a copy of the journal tells causes apart without
// reading the words.
func TestNotesKeepTheirReason(t *testing.T) {
	for _, c := range []struct {
		name   string
		setup  func(h *harness)
		code   vocab.Code
		reason vocab.Reason
		words  string
	}{
		{"still refused: an unlisted field", func(h *harness) {
			h.release("v1", func(f map[string][]byte) {
				f["compose.yaml"] = []byte(strings.Replace(string(f["compose.yaml"]), "    env_file: .env\n", "    env_file: .env\n    tty: true\n", 1))
			})
		}, vocab.PrivilegedRefused, vocab.ReasonUnlistedField, "still refused"},
		{"a failure waiting for its backoff: the registry refuses", func(h *harness) {
			h.release("v1", nil)
			h.dockerKnob("pull-error", "Error response from daemon: pull access denied for monky/api, repository does not exist or may require 'docker login': denied: requested access to the resource is denied")
		}, vocab.ComposePullFailed, vocab.ReasonRegistryDenied, "retry 2 of"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			c.setup(h)
			h.wantExit(h.tick(), 1)
			h.tick()
			e, ok := h.entry(func(e store.Entry) bool { return e.Event == machine.NoteCheckin && e.Code == c.code })
			if !ok || !strings.Contains(e.Detail, c.words) {
				t.Fatalf("no check-in note of %s saying %q (last %+v)", c.code, c.words, e)
			}
			if e.Reason != c.reason {
				t.Errorf("the note %q has reason %q, want %q", e.Detail, e.Reason, c.reason)
			}
		})
	}
}
