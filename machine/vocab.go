package machine

import (
	"fmt"
	"slices"
	"time"

	"github.com/tikali/monky-deployd/internal/vocab"
	"github.com/tikali/monky-deployd/store"
)

// The journal's note events (a journal entry whose from == to). The states write them, explain,
// status and the metrics read them; docs/JOURNAL.md lists every one (a test compares). The
// codes, the flight actions and the exit codes are internal/vocab's, defined there once.

// Note events: a journal entry that changes no state.
const (
	NoteCheckin         = "checkin"          // a check-in answered; the flight resumes, waits, or stays refused
	NoteCheckinFailed   = "checkin-failed"   // the check-in got no answer (exit 75, or 1 for a TLS or identity fault)
	NoteFetchFailed     = "fetch-failed"     // the bundle could not be fetched now (exit 75)
	NoteLeaseDeferred   = "lease-deferred"   // a lease was needed and none was granted this tick (exit 75)
	NoteLoginFailed     = "login-failed"     // OpenBao was unreachable for the login after the lease, or to ask whether a kept grant was used (exit 75)
	NoteBootstrap       = "bootstrap"        // logged in with the bootstrap grant
	NoteBootstrapFailed = "bootstrap-failed" // OpenBao was unreachable for the bootstrap login (exit 75)
	NoteRenew           = "renew"            // the token was renewed
	NoteTokenSwap       = "token-swap"       // the token neared its max ttl: leased and logged in again
	NoteUnauthenticated = "unauthenticated"  // a bearer was refused (by tenancy or OpenBao): the token was deleted
	NoteBlocked         = "blocked"          // a blocked tick ended at once, off the network
	NoteReportDropped   = "report-dropped"   // tenancy refused a report for good; it left the outbox
	NoteRollbackAllowed = "rollback-allowed" // a rollback to a sha applied before, allowed by the bundle's agent.allow_rollback
	NoteTickEnd         = "tick-end"         // why the tick ended early (exit 75 or 1) when no other entry says it
	NotePrune           = "prune"            // releases beyond keep_releases removed after an apply
	NoteTakeover        = "takeover"         // a 0.1.x box's token, applied sha and releases imported
	NoteClockCorrected  = "clock-corrected"  // times recorded in the future (a clock stepped back) taken as now
	NoteHeal            = "heal"             // a heartbeat found the applied release not running: what it found; compose up of it follows (counted against heal_budget)
	NoteHealed          = "healed"           // HEALED: the heal's compose up passed the health gate; what was found and done
	NoteHold            = "hold"             // a person held the box (monky-deployd hold): who, why, until when; or released it
	NoteHoldEnded       = "hold-ended"       // the hold's time passed: applies and heals go on
	NoteHeld            = "held"             // tenancy desired another sha while the box was held: the apply waits
)

// Notes lists every note event, in the order docs/JOURNAL.md gives them.
var Notes = []string{NoteCheckin, NoteCheckinFailed, NoteFetchFailed, NoteLeaseDeferred, NoteLoginFailed,
	NoteBootstrap, NoteBootstrapFailed, NoteRenew, NoteTokenSwap, NoteUnauthenticated, NoteBlocked,
	NoteReportDropped, NoteRollbackAllowed, NoteTickEnd, NotePrune, NoteTakeover, NoteClockCorrected, NoteHeal, NoteHealed, NoteHold, NoteHoldEnded, NoteHeld}

// StopNotes are the notes a step writes when it cannot go on now and the tick stops there
// (exit 75 for a temporary fault, the note says when 1): the step is kept and the next tick
// resumes it. Each tells why its tick ended (no tick-end note
// follows it), is logged as a warning, and explain words every one.
var StopNotes = []string{NoteCheckinFailed, NoteFetchFailed, NoteLeaseDeferred, NoteLoginFailed, NoteBootstrapFailed}

// IsStopNote reports whether event is one of StopNotes.
func IsStopNote(event string) bool { return slices.Contains(StopNotes, event) }

// LeaseAsked is the one outcome a LeaseEvent holds: every lease asked, before it is asked.
const LeaseAsked = "asked"

// AttemptLimit is the limit of failed attempts the record was parked or counted against: the
// one the agent used when the failure was committed, else the default.
// Backoff is the wait after failed attempt n (1-based): 2, 4, 8, 16 … minutes, at most 30 —
// longer than the timer's minute from the first failure on.
func Backoff(n int) time.Duration {
	d := 2 * time.Minute
	for i := 1; i < n && d < 30*time.Minute; i++ {
		d *= 2
	}
	if d > 30*time.Minute {
		d = 30 * time.Minute
	}
	return d
}

// ParksAt is the earliest a failed flight that is not parked parks, should every retry fail
// as it did: its next retry, then the backoffs of the attempts before the last (zero when it is
// parked or has no retry).
func ParksAt(rec store.Record) time.Time {
	n := rec.TotalAttempts()
	if rec.Parked || rec.Failure == nil || rec.NextRetryAt.IsZero() || n == 0 {
		return time.Time{}
	}
	at := rec.NextRetryAt
	for k := n + 1; k < AttemptLimit(rec); k++ {
		at = at.Add(Backoff(k))
	}
	return at
}

func AttemptLimit(rec store.Record) int {
	if rec.Failure != nil && rec.Failure.Limit > 0 {
		return rec.Failure.Limit
	}
	return MaxAttempts
}

// RecordFailedTick journals a tick that failed before the machine could move (the transport,
// the identity, the SDK, the lock file): a tick of its own with one tick-end entry holding the
// code and the words, and its exit code. It goes through the Engine like every write.
func RecordFailedTick(st store.Store, now Clock, envID string, exit int, code vocab.Code, reason vocab.Reason, subject, detail string) error {
	eng, err := Load(st, now)
	if err != nil {
		return err
	}
	started := now()
	if _, err := eng.BeginTick(envID); err != nil {
		return err
	}
	if err := eng.NoteAbout(NoteTickEnd, code, reason, subject, detail, started, nil); err != nil {
		return err
	}
	return eng.EndTick(TickEnd{Exit: exit}, store.DefaultRetention)
}

// Size says a byte count in binary units with the exact bytes beside: "1.50 GiB (1610612736 bytes)".
func Size(n int64) string {
	units := []string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	if n < 1024 {
		return fmt.Sprintf("%d bytes", n)
	}
	v, u := float64(n)/1024, 0
	for v >= 1024 && u < len(units)-1 {
		v /= 1024
		u++
	}
	return fmt.Sprintf("%.2f %s (%d bytes)", v, units[u], n)
}

// ShortSha names a sha as the journal's words and human output do: its first 12 characters,
// "(none)" for no sha.
func ShortSha(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	if sha == "" {
		return "(none)"
	}
	return sha
}

// Stamp is a time as human output prints it: date, time and Z.
func Stamp(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05Z") }
