package states

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/rs/zerolog"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/internal/redact"
	"github.com/tikali/monky-deployd/internal/sanitize"
	"github.com/tikali/monky-deployd/internal/vocab"
	"github.com/tikali/monky-deployd/machine"
	"github.com/tikali/monky-deployd/machine/explain"
	"github.com/tikali/monky-deployd/store"
)

const (
	maxDetail  = 1024
	maxLogTail = 2048
)

// enqueue persists a report in the outbox, in the transaction of the transition that
// produced it. Detail and log tail pass the redactor first: names only, never a value.
func (tk *tick) enqueue(r *store.Record, tx store.Tx, state machine.State, rep effects.Report) error {
	tk.outboxEmpty = false
	rep = tk.outgoing(rep)
	body, err := json.Marshal(rep)
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	now := tk.Now()
	if _, err := tx.Enqueue(store.QueuedReport{Queued: now, Body: body, Meta: store.QueuedReportMeta{Result: rep.Result, Sha: rep.Sha, State: string(state), Code: rep.Code}}); err != nil {
		return err
	}
	r.LastReport = &store.LastReport{Result: rep.Result, Sha: rep.Sha, Code: rep.Code, Detail: rep.Detail, At: now}
	return nil
}

// outgoing is rep as it is sent: the agent's env and version, detail and log tail masked and
// then cut (a cut never leaves part of a secret behind), the log tail's control characters
// escaped. Every report passes here (and a failed one's why through withWhy) on its way to the
// outbox or to tenancy: the outbox is the redacting sink of reports, as the store is of the
// journal and the logger of the logs, so the steps that build a report mask nothing.
func (tk *tick) outgoing(rep effects.Report) effects.Report {
	rep.EnvID = tk.Cfg.EnvID
	rep.AgentVersion = tk.Version
	rep.Detail = truncate(redact.String(rep.Detail), maxDetail)
	rep.LogTail = tail(sanitize.Text(redact.String(rep.LogTail)), maxLogTail)
	if rep.Containers == nil {
		rep.Containers = []effects.Container{}
	}
	if tk.held != nil && rep.Why == nil && rep.Result == effects.ResultApplied {
		// a held box's reports carry the hold (PROTOCOL.md §1)
		rec := tk.eng.Record()
		rep.Why = heldWhy(tk.held, tk.eng.State(), rec)
	}
	return rep
}

// flushOutbox sends every queued report, oldest first, removing each once tenancy
// acknowledges it. When the acknowledged report is the one the current state waits for,
// the machine moves on to Reported.
func (tk *tick) flushOutbox(ctx context.Context) error {
	if tk.outboxEmpty {
		return nil // empty when the tick read the file, and nothing enqueued since
	}
	var queued []store.QueuedReport
	if err := tk.Store.View(func(tx store.Tx) error {
		var err error
		queued, err = tx.Outbox()
		return err
	}); err != nil {
		return err
	}
	for _, q := range queued {
		if err := tk.send(ctx, q); err != nil {
			return err
		}
	}
	return nil
}

// send sends one queued report: acknowledged, it leaves the outbox; refused for good, it is
// dropped; otherwise it stays, and the error ends the flush.
func (tk *tick) send(ctx context.Context, q store.QueuedReport) error {
	var rep effects.Report
	if err := json.Unmarshal(q.Body, &rep); err != nil {
		return fmt.Errorf("outbox report %d: %w", q.ID, err)
	}
	if rep.Result == effects.ResultFailed && rep.Why == nil {
		// the why is the verdict as the state file holds it once the report's transition is
		// committed; it goes into the queued body, which keeps it until tenancy has it
		rep = withWhy(rep, tk.reportWhy(q, rep))
		if body, err := json.Marshal(rep); err == nil {
			q.Body = body
		}
	}
	started := tk.Now()
	err := tk.withBearer(ctx, func() error { return tk.Fx.Tenancy.Report(ctx, tk.token, rep) })
	if err != nil && tk.isBlocked() {
		// the report was sent and tenancy answered it (a 403, a second 401): it counts, so
		// that the outbox's "sent N times" agrees with the block's entry
		if cerr := tk.eng.ReportNotAcknowledged(q); cerr != nil {
			tk.Log.Warn().Msg("count the report's attempt: " + cerr.Error())
		}
		return err
	}
	if err != nil && droppable(err) {
		// tenancy refused this report for good (a 4xx that is not about the bearer): keeping
		// it would fail every later tick. It is dropped, and the journal says so.
		tk.Log.Warn().Msg("tenancy refused a report; dropped: " + err.Error())
		return tk.acknowledged(q, started, false, "refused by tenancy and dropped: "+err.Error())
	}
	if err != nil {
		if cerr := tk.eng.ReportNotAcknowledged(q); cerr != nil {
			tk.Log.Warn().Msg("count the report's attempt: " + cerr.Error())
		}
		tk.Log.Warn().Msg("report not acknowledged (kept in the outbox): " + err.Error())
		tk.say(zerolog.WarnLevel, err.Error())
		return err
	}
	return tk.acknowledged(q, started, true, "acknowledged")
}

// reportWhy is the box's why for the failed report q: explain's, or, when explain names nothing
// (the box recovered before the report went), the report's own code and words.
func (tk *tick) reportWhy(q store.QueuedReport, rep effects.Report) *effects.ReportWhy {
	var w *effects.ReportWhy
	if err := tk.Store.View(func(tx store.Tx) error {
		var err error
		lim := explain.LimitsOf(tk.Cfg)
		lim.TickRunning = true // this tick holds the lock
		w, err = boxWhy(tx, tk.Now(), lim)
		return err
	}); err != nil {
		tk.Log.Warn().Msg("the report's why: " + err.Error())
	}
	if w != nil {
		return w
	}
	// the report's own code, as it was queued (an outbox written before codes were kept has
	// none: the words then hold it)
	code := q.Meta.Code
	words := rep.Detail
	if code != "" {
		words = strings.TrimPrefix(words, string(code)+": ")
	}
	return &effects.ReportWhy{Code: string(code), Verdict: effects.VerdictWorking, Since: q.Queued.UTC().Format(time.RFC3339),
		Fault: "The box no longer says why: it has moved on since this report was queued.", Evidence: words,
		Next: "The next report says where the box stands now.", Fix: "monky-deployd explain"}
}

// acknowledged removes an acknowledged report and, where the state waited for it, fires
// the report transition in the same transaction. accepted: tenancy acknowledged it (else it
// refused it and the report is dropped); how says which in words.
func (tk *tick) acknowledged(q store.QueuedReport, started time.Time, accepted bool, how string) error {
	ack := func(r *store.Record, tx store.Tx) error {
		if err := tx.Ack(q.ID); err != nil {
			return err
		}
		if r.LastReport != nil && r.LastReport.Sha == q.Meta.Sha && r.LastReport.Result == q.Meta.Result {
			r.LastReport.Acknowledged = true
		}
		return nil
	}
	st := tk.eng.State()
	rec := tk.eng.Record()
	waits := string(st) == q.Meta.State && (st == machine.Healthy || st == machine.Down || (st == machine.Failed && rec.Action == vocab.ActionNone))
	if waits {
		detail := "report " + q.Meta.Result
		if q.Meta.Sha != "" {
			detail += " for " + machine.ShortSha(q.Meta.Sha)
		}
		detail += " " + how
		return tk.eng.Fire(machine.Outcome{Event: machine.EvReport, Detail: detail, Update: ack}, started)
	}
	if !accepted {
		return tk.eng.Note(machine.NoteReportDropped, "", "", "report "+q.Meta.Result+" for "+machine.ShortSha(q.Meta.Sha)+" "+how, started, ack)
	}
	return tk.eng.Save(ack)
}

// pendingReports counts the reports still in the outbox.
func (tk *tick) pendingReports() int {
	if tk.outboxEmpty {
		return 0
	}
	n := 0
	_ = tk.Store.View(func(tx store.Tx) error {
		q, err := tx.Outbox()
		n = len(q)
		return err
	})
	return n
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}

// droppable reports whether a report error is tenancy's final word on that report.
func droppable(err error) bool {
	switch effects.KindOf(err) {
	case effects.Permanent, effects.NotFound:
		var e *effects.Error
		return errors.As(err, &e) && e.Status >= 400 && e.Status < 500
	}
	return false
}

// withWhy is the failed report rep with the box's why, redacted and cut so the whole report
// stays within effects.MaxReportBytes: evidence first, then fix, are cut (ending "…"); the other
// fields never are. Any other report goes without one.
func withWhy(rep effects.Report, w *effects.ReportWhy) effects.Report {
	if rep.Result != effects.ResultFailed || w == nil {
		rep.Why = nil
		return rep
	}
	c := *w
	for _, f := range []*string{&c.Code, &c.Verdict, &c.Since, &c.Fault, &c.Evidence, &c.Next, &c.Fix} {
		*f = redact.String(*f)
	}
	rep.Why = &c
	for _, f := range []*string{&c.Evidence, &c.Fix} {
		over := reportSize(rep) - effects.MaxReportBytes
		if over <= 0 {
			break
		}
		*f = cutTo(*f, len(*f)-over)
		// JSON escapes can make the cut fall short: cut again until it fits or is gone
		for reportSize(rep) > effects.MaxReportBytes && *f != "" && *f != "…" {
			*f = cutTo(*f, len(*f)-len(*f)/8-8)
		}
	}
	return rep
}

func reportSize(rep effects.Report) int {
	b, _ := json.Marshal(rep)
	return len(b)
}

// cutTo cuts s to at most n bytes, "…" included, on a rune boundary ("" when nothing fits).
func cutTo(s string, n int) string {
	const ell = "…"
	if len(s) <= n {
		return s
	}
	n -= len(ell)
	if n < 0 {
		n = 0
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + ell
}
