package explain

import (
	"fmt"

	"github.com/tikali/monky-deployd/internal/vocab"
	"github.com/tikali/monky-deployd/machine"
)

// held is the why of a box a person held while tenancy desires another sha than it runs: the
// apply waits for the hold, which ends by itself (working on it), or a refused or parked sha
// stays where it is (machine.HeldNext: the words the check-in says too). A held box that runs
// what is desired reads converged; status shows its hold on a line of its own.
func (in Input) held(mk maker) *Why {
	rec := in.Rec
	h := rec.Hold
	if !h.Active(in.Now) || rec.DesiredSha == "" || rec.DesiredSha == rec.AppliedSha {
		return nil
	}
	next, _ := machine.HeldNext(h, machine.State(rec.State), rec)
	return mk(vocab.Held, "", fmt.Sprintf("held by %s until %s: %s", h.By, machine.Stamp(h.Until), h.Reason), next, h.Since, in.newestTick())
}
