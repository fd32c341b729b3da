package states

import (
	"context"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/machine"
)

// stepReport: Healthy → Reported. The apply succeeded: old releases go whether or not tenancy
// has the report yet; a report tenancy did not acknowledge waits in the outbox and ends the
// tick with a temporary error, so the next tick sends it again.
func (tk *tick) stepReport(ctx context.Context) error {
	ferr := tk.flushOutbox(ctx)
	if ferr != nil || tk.eng.State() == machine.Healthy {
		tk.prune(ctx)
	}
	if ferr != nil {
		return ferr
	}
	if tk.eng.State() == machine.Healthy {
		return &effects.Error{Op: "report", Kind: effects.Temporary, Msg: "the applied report waits in the outbox"}
	}
	return nil
}
