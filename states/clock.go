package states

import (
	"fmt"
	"strings"
	"time"

	"github.com/tikali/monky-deployd/machine"
	"github.com/tikali/monky-deployd/store"
)

// clockSkew is how far in the future a recorded time may lie before it is taken for a clock
// that was ahead and was stepped back.
const clockSkew = 5 * time.Minute

// futureLeases counts the lease-budget entries recorded further in the future than now allows.
func futureLeases(tx store.Tx, now time.Time) (int, error) {
	evs, err := tx.Leases(now.Add(clockSkew + 1))
	return len(evs), err
}

// correctClock treats as now every recorded time that lies further in the future than it can
// (a box that booted with its clock ahead, applied, then had it stepped back by NTP): lease-budget
// entries, tenancy's Retry-After, the apply's backoff; a token expiry beyond the max ttl is
// forgotten (lookup-self learns it again). Without this the budget stayed spent, and the retry
// waited, until the clock caught up — a year, for a clock a year ahead. It commits only when
// something was corrected, with a journal note saying what. future is how many lease-budget
// entries lie in the future (futureLeases, read with the tick's other reads).
func (tk *tick) correctClock(future int) error {
	now := tk.Now()
	rec := tk.eng.Record()
	var fixes []string
	if future > 0 {
		fixes = append(fixes, fmt.Sprintf("%d lease-budget entr(ies) restamped now", future))
	}
	retryAfter := rec.LeaseRetryAfter.After(now.Add(machine.LeaseWindow + clockSkew))
	if retryAfter {
		fixes = append(fixes, "tenancy's Retry-After ("+rec.LeaseRetryAfter.UTC().Format(time.RFC3339)+") treated as now")
	}
	nextRetry := rec.NextRetryAt.After(now.Add(machine.Backoff(tk.MaxAttempts+1) + clockSkew))
	if nextRetry {
		fixes = append(fixes, "the retry backoff ("+rec.NextRetryAt.UTC().Format(time.RFC3339)+") treated as now")
	}
	expiry := rec.Token.ExpiresAt.After(now.Add(maxTokenTTL + clockSkew))
	if expiry {
		fixes = append(fixes, "the token's expiry forgotten (lookup-self learns it again)")
	}
	if len(fixes) == 0 {
		return nil
	}
	detail := "the clock is behind times recorded earlier (it was ahead and was stepped back): " + strings.Join(fixes, "; ")
	tk.Log.Warn().Msg(detail)
	return tk.eng.Note(machine.NoteClockCorrected, "", "", detail, now, func(r *store.Record, tx store.Tx) error {
		if retryAfter {
			r.LeaseRetryAfter = now
		}
		if nextRetry {
			r.NextRetryAt = now
		}
		if expiry {
			r.Token.ExpiresAt = time.Time{}
		}
		_, err := tx.RestampLeases(now, clockSkew)
		return err
	})
}
