package explain

import (
	"fmt"

	"github.com/tikali/monky-deployd/internal/vocab"
	"github.com/tikali/monky-deployd/machine"
)

// held is the why of a box a person held while tenancy desires another sha than it runs: the
// apply waits for the hold, which ends by itself (working on it). A held box that runs what is
// desired reads converged; status shows its hold on a line of its own.
func (in Input) held(mk maker) *Why {
	rec := in.Rec
	h := rec.Hold
	if !h.Active(in.Now) || rec.DesiredSha == "" || rec.DesiredSha == rec.AppliedSha {
		return nil
	}
	applied := "nothing (no release was applied here yet)"
	if rec.AppliedSha != "" {
		applied = machine.ShortSha(rec.AppliedSha)
	}
	w := mk(vocab.Held, "", fmt.Sprintf("held by %s until %s: %s", h.By, machine.Stamp(h.Until), h.Reason),
		fmt.Sprintf("the apply of %s waits until the hold ends at %s; %s keeps serving", machine.ShortSha(rec.DesiredSha), machine.Stamp(h.Until), applied),
		h.Since, in.newestTick())
	return w
}
