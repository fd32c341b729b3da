package explain

import (
	"fmt"
	"strings"
	"time"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/internal/vocab"
	"github.com/tikali/monky-deployd/machine"
	"github.com/tikali/monky-deployd/store"
)

// Why is the answer to "why did the update not happen": the code, the real fault in one
// sentence, the evidence the agent recorded (its own words, never a value), what the agent does
// next and when, and the one command that fixes or checks it.
type Why struct {
	Code vocab.Code `json:"code"`
	// Reason is the typed cause behind Code, as the record keeps it ("" when the code says
	// all, or the record is older than reasons).
	Reason   vocab.Reason `json:"reason,omitempty"`
	Fault    string       `json:"fault"`
	Evidence string       `json:"evidence"`
	Next     string       `json:"next"`
	Fix      string       `json:"fix"`
	At       time.Time    `json:"at"` // when the agent recorded it
	Tick     uint64       `json:"tick,omitempty"`
	// Since is when the fault began: the first tick of a run of exit 75, the refusal, the
	// first failed attempt, the last tick of a stale box.
	Since time.Time `json:"since"`
	// Verdict is the box's: working or needs_person.
	Verdict string `json:"verdict"`
	// Who must act on this fault: box, publisher, openbao or tenancy (fix.go, whoActs).
	Who string `json:"who,omitempty"`
	// short is Next in a few words, for the `next` line of a box that rests but is not well.
	short string
	// person: this fault alone makes the box need a person.
	person bool
	// subject is the file or directory the fault is about (store.Entry.Subject), which the fix
	// line names.
	subject string
}

// temporaryEvents are the journal notes a tick ends on when it could not go on now.
var temporaryEvents = map[string]string{
	machine.NoteCheckinFailed:   "the check-in did not get an answer",
	machine.NoteLeaseDeferred:   "the apply needs a new lease (the token in hand no longer reads the secrets) and none was granted this tick",
	machine.NoteLoginFailed:     "OpenBao was unreachable for the login after the lease, or to ask whether the kept grant was already used",
	machine.NoteBootstrapFailed: "OpenBao was unreachable for the bootstrap login",
	machine.NoteFetchFailed:     "the bundle could not be fetched",
	machine.NoteTickEnd:         "the tick ended early",
}

// allWhys are every active fault, the first the one standing between the box and tenancy's
// desired sha; none when nothing does (converged, or a flight that goes on by itself).
func allWhys(in Input) []*Why {
	var out []*Why
	outbox := func(code vocab.Code) bool { return code == vocab.ReportPending || code == vocab.OutboxStuck }
	add := func(w *Why) {
		if w == nil {
			return
		}
		for _, x := range out {
			if x.Code == w.Code || (outbox(x.Code) && outbox(w.Code)) {
				return
			}
		}
		out = append(out, w)
	}
	mk, nextTick := in.maker(), in.nextTickWords()
	add(in.stale(mk))
	add(explainWhy(in))
	add(in.unwritable(mk))
	add(in.held(mk))
	for _, w := range in.sickAll(mk, nextTick) {
		add(w)
	}
	add(in.rateLimited(mk))
	return out
}

// maker builds a why of code from the vocabulary's words and this box's names.
func (in Input) maker() maker {
	return func(code vocab.Code, fault, evidence, next string, at time.Time, tick uint64) *Why {
		c, ok := vocab.CauseOf(code)
		if !ok {
			// a code of tenancy's or OpenBao's own that this agent has no words for
			c = vocab.Cause{Fault: "the step failed with " + string(code) + ", a code this agent has no words for: the evidence holds the answer's own",
				Fix: "monky-deployd explain -n 5   # the entries before it name the step and who answered"}
		}
		if fault == "" {
			fault = c.Fault
		}
		// the names in the fix are filled from the record by Decide (fix.go)
		return &Why{Code: code, Fault: sentence(fault), Evidence: evidence, Next: sentence(next), Fix: c.Fix, At: at.UTC(), Tick: tick, Since: at.UTC(), short: next}
	}
}

// explainWhy names the one thing standing between the box and tenancy's desired sha, or nil
// when nothing does (converged, or a flight that goes on by itself).
func explainWhy(in Input) *Why {
	rec := in.Rec
	mk := in.maker()
	nextTick := in.nextTickWords()

	// A block first: a blocked tick touches nothing else.
	if stateOf(rec) == string(machine.Blocked) && rec.Block != nil {
		return in.blockedWhy(mk, nextTick)
	}
	// A tick that could not go on now: its note is the fault of the moment.
	if e, ok := in.temporary(); ok {
		return in.temporaryWhy(e, mk, nextTick)
	}
	switch stateOf(rec) {
	case string(machine.Refused):
		return in.refusedWhy(mk, nextTick)
	case string(machine.Failed):
		return in.failedWhy(mk, nextTick)
	}
	return in.sick(mk, nextTick)
}

// blockedWhy is the why of a blocked box: only a person or a new grant clears it.
func (in Input) blockedWhy(mk maker, nextTick string) *Why {
	rec := in.Rec
	b := rec.Block
	next := "every tick exits 1 at once without touching the network until a new bootstrap.jwt appears (the next tick looks " + nextTick + ") or `monky-deployd bootstrap --force`"
	if b.Code == vocab.AgentEnvMismatch {
		next = "every tick exits 78 at once without touching the network until config.yaml changes or `monky-deployd resume`"
	}
	code, fault, evidence := b.Code, "", trimCode(b.Code, b.Detail)
	switch b.Reason {
	case vocab.ReasonGrantUnreadable:
		// no one refused anything: the agent's user cannot read the grant on disk
		fault = "no token is stored and the bootstrap grant on disk cannot be read by the agent's user (its owner or mode): nothing was sent to tenancy or OpenBao"
		next = "every tick exits 1 at once without touching the network until the grant is readable and `monky-deployd resume` (or a new bootstrap.jwt) lifts the block"
	case vocab.ReasonGrantAbsent:
		fault = "no OpenBao token is stored and no bootstrap grant is on disk: the box has not logged in since its token went, and has nothing to log in with"
	case vocab.ReasonGrantRefused:
		fault = "OpenBao refused the bootstrap grant at the login (expired, superseded or for another role): no token was stored and the grant cannot be used again"
	case vocab.ReasonShape:
		fault = "the stored token was not a credential (empty, too long, or holding a space or a byte that is not printable ASCII), so it was not used: the agent deleted it without sending it, and no fresh bootstrap grant is on disk to log in again"
	case vocab.ReasonTenancy401, vocab.ReasonBaoRefused, "":
		e, dropped := in.find(func(e store.Entry) bool { return e.Event == machine.NoteUnauthenticated })
		switch {
		case dropped && b.Code == vocab.AgentUnauthenticated:
			evidence = e.Detail + "; no fresh bootstrap grant on disk"
			if baoRefused(e) {
				// OpenBao refused the token, not tenancy: name OpenBao's code
				code = e.Code
				fault = "OpenBao refused the box's token (" + string(e.Code) + ": OpenBao's refusal, not tenancy's), so the agent deleted it; no fresh bootstrap grant is on disk to log in again"
			}
		case b.Reason == "" && b.Code == vocab.AgentUnauthenticated:
			// a block written before reasons were kept, no refusal in the journal: its words
			// are the evidence, not read
			fault = "the box has no usable token and no fresh bootstrap grant on disk to log in with (this block was written by an agent that kept no typed cause: the evidence holds its words)"
		}
	}
	w := mk(code, fault, evidence, next, b.At, in.tickWhere(func(e store.Entry) bool { return e.To == string(machine.Blocked) && e.From != e.To }))
	switch {
	case b.Reason == vocab.ReasonGrantUnreadable:
		w.Fix = "sudo ls -l {bootstrap}; sudo chown {user} {bootstrap} && sudo chmod 0600 {bootstrap} && sudo -u {user} monky-deployd resume --now"
	case code != b.Code:
		w.Fix = causeOf(vocab.BaoPermissionDenied).Fix + "   # then re-run the install kit (a new bootstrap.jwt unblocks)"
	case b.Reason == vocab.ReasonShape:
		// the token is gone: only a new grant logs the box in again
		w.Fix = causeOf(vocab.AgentUnauthenticated).Fix
	}
	w.Reason = b.Reason
	return w
}

// temporaryWhy is the why of a tick that could not go on now (its note e): the fault of the
// moment, which the next tick tries again — unless it lasts.
func (in Input) temporaryWhy(e store.Entry, mk maker, nextTick string) *Why {
	fault := temporaryEvents[e.Event]
	reuseUnasked := e.Event == machine.NoteLeaseDeferred && (e.Reason == vocab.ReasonReuseUnasked || (e.Reason == "" && baoCode(e.Code)))
	if reuseUnasked {
		// OpenBao could not be asked about the token in hand: no new lease is needed yet
		fault = "OpenBao could not be asked whether the token in hand still reads the secrets, so no lease was asked on a guess"
	}
	tenancysOwn := e.Event == machine.NoteCheckinFailed && e.Reason == vocab.ReasonTenancy5xx
	if tenancysOwn {
		// an answer, not a silence: the mesh and the bearer got through
		fault = "tenancy answered the check-in with a server error of its own: it, or what it depends on, cannot serve the box now"
	}
	if c, known := vocab.CauseOf(e.Code); known {
		fault += ": " + c.Fault
	}
	next := in.temporaryNext(e, nextTick, reuseUnasked)
	code := e.Code
	if code == "" {
		code = vocab.Code(strings.ToUpper(strings.ReplaceAll(e.Event, "-", "_")))
	}
	evidence := trimCode(e.Code, e.Detail)
	if code == vocab.ReportPending && len(in.Outbox) > 0 && in.outboxStuck(in.Outbox[0]) {
		q := in.Outbox[0]
		code, fault = vocab.OutboxStuck, causeOf(vocab.OutboxStuck).Fault
		evidence = fmt.Sprintf("%d report(s) in the outbox; the oldest: %s for %s, queued %s, sent %d time(s); the last answer: %s",
			len(in.Outbox), q.Meta.Result, machine.ShortSha(q.Meta.Sha), machine.Stamp(q.Queued), q.Attempts, trimCode(e.Code, e.Detail))
		next = "the outbox is sent again at every tick (the next " + nextTick + "); tenancy does not know what runs here until it drains"
	}
	if n, since := in.repeated75(); n >= 3 {
		fault += fmt.Sprintf(" — %d ticks in a row ended exit 75 (since %s): this is no blip", n, machine.Stamp(since))
		next += fmt.Sprintf("; after %d in a row, check the fix below rather than wait", n)
	}
	w := mk(code, fault, evidence, next, e.At, e.Tick)
	w.Reason, w.subject = e.Reason, e.Subject
	switch {
	case tenancysOwn && !vocab.Known(e.Code):
		w.Fix = vocab.NoCommand + "the fault is tenancy's (its code names it); nothing on this box mends it: tell tenancy's operators if it lasts"
	case !vocab.Known(e.Code) && e.Event == machine.NoteCheckinFailed:
		w.Fix = "systemctl status ziti-edge-tunnel   # and tenancy's health"
	}
	if _, since := in.repeated75(); !since.IsZero() {
		w.Since = since.UTC()
	}
	if lasted := in.Now.Sub(w.Since); lasted > in.Limits.stuckAfter() {
		// a temporary fault that lasts is no longer one: a person looks
		w.person = true
		w.Next = sentence(strings.TrimSuffix(w.Next, ".") + fmt.Sprintf("; it has lasted %s, past stuck_after_s (%d): a person should look now — it still clears by itself at the first tick after the far side answers again", roundAge(lasted), int(in.Limits.stuckAfter().Seconds())))
	}
	return w
}

// temporaryNext says what the next tick does about the temporary fault of its note e;
// reuseUnasked: OpenBao could not be asked about the token in hand.
func (in Input) temporaryNext(e store.Entry, nextTick string, reuseUnasked bool) string {
	rec := in.Rec
	lastSum, _, _ := in.newest()
	next := "the next tick (" + nextTick + ") tries again; nothing is lost"
	if reuseUnasked {
		next = "the next tick (" + nextTick + ") asks OpenBao again and goes on with the token in hand when it answers; nothing is lost"
	}
	if lastSum.Exit != nil && *lastSum.Exit == vocab.ExitFail {
		next = "the next tick (" + nextTick + ") runs again and ends the same way until the fix below is done"
	}
	switch {
	case e.Code == vocab.LeaseBudget:
		next = fmt.Sprintf("the budget frees a slot at %s; the first tick after it asks the lease and the apply goes on", machine.Stamp(in.Frees))
		if in.Frees.IsZero() || !in.Now.Before(in.Frees) {
			next = "a slot is free again: the next tick (" + nextTick + ") asks the lease and the apply goes on"
		}
	case e.Code == vocab.LeaseRateLimited && in.Now.Before(rec.LeaseRetryAfter):
		next = "no lease before " + machine.Stamp(rec.LeaseRetryAfter) + " (tenancy's Retry-After); then the apply goes on by itself"
	case e.Event == machine.NoteLoginFailed:
		next = "the next tick (" + nextTick + ") logs in with the kept grant; no second lease is asked"
	case e.Event == machine.NoteBootstrapFailed:
		next = "the next tick (" + nextTick + ") logs in with the bootstrap grant, which stays on disk"
	case e.Code == vocab.ReportPending:
		next = "the next tick (" + nextTick + ") sends the outbox again; the box runs what it applied meanwhile"
	}
	return next
}

// refusedWhy is the why of a refused sha, nil when the record holds no refusal.
func (in Input) refusedWhy(mk maker, nextTick string) *Why {
	rec := in.Rec
	r := rec.Refusal
	if r == nil {
		return nil
	}
	next := fmt.Sprintf("sha %s stays refused: it is not fetched again; %s", machine.ShortSha(r.Sha), clears(r.Code))
	if dockerRefusal(r.Code) {
		next = "checked again at every tick (the next " + nextTick + "), before any lease; the apply goes on by itself once docker compose can run"
	}
	if r.Code == vocab.DiskInsufficient {
		next = "measured again at every tick (the next " + nextTick + "); the apply goes on by itself once the space is there"
		if r.NeedBytes > implausibleNeed {
			next = "measured again at every tick, but no disk here will hold " + machine.Size(r.NeedBytes) + ": it stays refused until tenancy desires a sha whose bundle declares a true disk_need_bytes"
		}
	}
	fault := privilegedFault(r.Code, r.Reason)
	composeFault, composeFix := composeMissing(r.Code, r.Reason)
	if composeFault != "" {
		fault = composeFault
	}
	if r.Code == vocab.DiskInsufficient && r.NeedBytes > implausibleNeed {
		fault = "the bundle declares it needs " + machine.Size(r.NeedBytes) + " of image storage, which no box has: its disk_need_bytes is wrong, not this disk"
	}
	w := mk(r.Code, fault, trimCode(r.Code, r.Detail), next, r.At, in.tickOf(r.Code))
	w.Reason = r.Reason
	if composeFix != "" {
		w.Fix = composeFix
	}
	if r.Code == vocab.DiskInsufficient && r.NeedBytes > implausibleNeed {
		w.Fix = fmt.Sprintf("%sin monky-deploy, fix disk_need_bytes in the bundle's bundle.json (it declares %s; no image set needs that) and publish the bundle again", vocab.NoCommand, machine.Size(r.NeedBytes))
	}
	return w
}

// failedWhy is the why of a failed apply (or an unhealthy heartbeat), nil when the record
// holds no failure.
func (in Input) failedWhy(mk maker, nextTick string) *Why {
	rec := in.Rec
	if rec.Action == vocab.ActionNone {
		return in.unhealthyWhy(mk, nextTick)
	}
	f := rec.Failure
	if f == nil {
		return nil
	}
	n := rec.TotalAttempts()
	limit := machine.AttemptLimit(rec)
	var next string
	switch {
	case rec.Parked && f.Reverted && f.NotServing != "":
		next = fmt.Sprintf("the release last healthy here, %s, was brought back but is not serving now: %s: %s; %s is not applied again until tenancy desires another sha or `monky-deployd resume`", machine.ShortSha(f.RevertTo), f.NotServingCode, f.NotServing, machine.ShortSha(f.Sha))
	case rec.Parked && f.Reverted:
		next = fmt.Sprintf("the release last healthy here, %s, serves again: the bundle consented (agent.revert_on_failure) to leaving %s, which is not applied again until tenancy desires another sha or `monky-deployd resume`", machine.ShortSha(f.RevertTo), machine.ShortSha(f.Sha))
	case rec.Parked && f.RevertFailed != "":
		next = fmt.Sprintf("the revert to %s failed too (%s): the box stops reverting; nothing is tried until `monky-deployd resume` or a new desired sha", machine.ShortSha(f.RevertTo), f.RevertFailed)
	case rec.Parked:
		next = fmt.Sprintf("parked after %d failed attempts of %s: nothing is tried until `monky-deployd resume` or a new desired sha", n, machine.ShortSha(f.Sha))
	default:
		next = fmt.Sprintf("attempt %d of %d failed (the step from %s); retry %d of %d at %s (backoff), unless tenancy desires another sha first", n, limit, f.State, n+1, limit, machine.Stamp(rec.NextRetryAt))
	}
	fault, fix := causeOf(f.Code).Fault, ""
	if pf := privilegedFault(f.Code, f.Reason); pf != "" {
		fault = pf
	}
	if cf, cfix := composeMissing(f.Code, f.Reason); cf != "" {
		fault, fix = cf, cfix
	}
	var person bool
	switch {
	case f.Code == vocab.ComposePullFailed:
		fault, fix = pullKind(f.Reason)
		if f.Reason.Hopeless() && !rec.Parked {
			// the registry gives the same answer to every retry: say so, and that a person acts
			person = true
			next = fmt.Sprintf("attempt %d of %d failed (the step from %s); the retry at %s gets the same answer from the registry until someone acts: it does not clear by waiting", n, limit, f.State, machine.Stamp(rec.NextRetryAt))
		}
		if f.Reason == vocab.ReasonNetwork || f.Reason == vocab.ReasonRegistryDNS {
			if since := in.firstFailure(f); in.Now.Sub(since) > in.Limits.stuckAfter() {
				person = true
				next += fmt.Sprintf("; failing since %s, past stuck_after_s (%d): it will not clear by waiting", machine.Stamp(since), int(in.Limits.stuckAfter().Seconds()))
			}
		}
	case f.Code == vocab.Unhealthy:
		fault = "a service did not turn healthy within healthy_timeout_s after compose up"
		if f.Reason == vocab.ReasonExited {
			fault = "a service exited after compose up, and its restart policy (\"no\") never starts it again"
		}
	case f.Code == vocab.BundleNotFound:
		// tenancy has no bundle for the sha it desires: the publisher's, like a refusal — no
		// retry finds one until it is published (the retries go on, and apply it then)
		person = true
		fault = "tenancy answered 404 for the bundle of the desired sha " + machine.ShortSha(f.Sha) + ": its publisher has not published a bundle for it (or desired a sha it never rendered), so nothing was fetched; the publisher publishes it or desires another sha"
		if !rec.Parked {
			next = fmt.Sprintf("attempt %d of %d failed (the step from %s); the retry at %s fetches it again and applies it once it is published — it does not clear by waiting until the publisher acts", n, limit, f.State, machine.Stamp(rec.NextRetryAt))
		}
	case f.Code == vocab.StateUnwritable:
		// the box's own disk: red from its first tick, and it clears by itself once written
		person = true
		next = fmt.Sprintf("the next tick (%s) does the step from %s again, no attempt spent; it goes on by itself once the file can be written", nextTick, f.State)
	}
	w := mk(f.Code, fault, trimCode(f.Code, f.Detail), next, f.At, in.tickOf(f.Code))
	if fix != "" {
		w.Fix = fix
	}
	w.person = w.person || person
	w.Reason = f.Reason
	return w
}

// maker builds a why from its parts.
type maker func(code vocab.Code, fault, evidence, next string, at time.Time, tick uint64) *Why

// sick is the first of sickAll, nil when none.
func (in Input) sick(mk maker, nextTick string) *Why {
	if ws := in.sickAll(mk, nextTick); len(ws) > 0 {
		return ws[0]
	}
	return nil
}

// sickAll finds what keeps a box that rests as if converged from being well: an unhealthy
// service, a token that is refused or cannot be kept alive, a spent lease budget, a lease at
// every tick, an outbox that does not drain. Every one that holds, in that order.
func (in Input) sickAll(mk maker, nextTick string) []*Why {
	var out []*Why
	rec := in.Rec
	if rec.Action == vocab.ActionNone && rec.LastReport != nil && rec.LastReport.Result == effects.ResultFailed {
		out = append(out, in.unhealthyWhy(mk, nextTick))
	}
	if w := in.refusedTokenWhy(mk, nextTick); w != nil {
		out = append(out, w)
	}
	if w := in.tokenWhy(mk, nextTick); w != nil {
		out = append(out, w)
	}
	if in.Used >= machine.LeaseLimit && in.Now.Before(in.Frees) {
		out = append(out, mk(vocab.LeaseBudget, "", fmt.Sprintf("%d/%d leases asked since %s", in.Used, machine.LeaseLimit, machine.Stamp(in.Frees.Add(-machine.LeaseWindow))),
			"no lease is asked before "+machine.Stamp(in.Frees)+": an apply or a token swap that needs one waits until then", in.Frees.Add(-machine.LeaseWindow), in.newestTick()))
	}
	if n := in.leasingTicks(); n >= 4 {
		w := mk(vocab.LeaseEveryTick, "", fmt.Sprintf("a lease was asked in each of the last %d ticks (%d/%d in the last hour)", n, in.Used, machine.LeaseLimit),
			fmt.Sprintf("the next tick (%s) asks again; at %d/%d the budget stops the applies and the token swaps for an hour", nextTick, machine.LeaseLimit, machine.LeaseLimit), in.Now, in.newestTick())
		if len(in.Leases) > 0 {
			w.Since = in.Leases[0].At.UTC()
		}
		w.person = true
		out = append(out, w)
	}
	if w := in.outboxWhy(mk, nextTick); w != nil {
		out = append(out, w)
	}
	return out
}

// refusedTokenWhy: a token OpenBao refuses tick after tick (nil when it does not).
func (in Input) refusedTokenWhy(mk maker, nextTick string) *Why {
	rec := in.Rec
	// a token OpenBao refuses, again and again: the box lives from one bootstrap to the next
	refused := 0
	var lastRefusal, firstRefusal store.Entry
	for _, t := range in.Recent {
		for _, e := range in.Entries[t.Tick] {
			if e.Event == machine.NoteUnauthenticated {
				refused += 1 + int(t.Folded) // a folded tick stands for as many ticks like it
				if firstRefusal.At.IsZero() {
					firstRefusal = e
				}
				lastRefusal = e
				break
			}
		}
	}
	if refused >= 2 && stateOf(rec) != string(machine.Blocked) {
		code := lastRefusal.Code
		fault := "the box's token is refused tick after tick: each time the agent deletes it and logs in again with a bootstrap grant, so the box lives from one grant to the next"
		if baoRefused(lastRefusal) {
			fault = "OpenBao refuses the box's token (" + string(code) + ", OpenBao's refusal, not tenancy's): each time the agent deletes it and logs in again with a bootstrap grant, so the box lives from one grant to the next"
		}
		next := fmt.Sprintf("the next tick (%s) meets the same refusal and deletes the token again; it goes on only while a fresh bootstrap.jwt is on disk, else it blocks", nextTick)
		w := mk(code, fault, fmt.Sprintf("refused in %d of the last %d ticks; the last: %s", refused, in.recentCount(), trimCode(code, lastRefusal.Detail)), next, lastRefusal.At, lastRefusal.Tick)
		if baoRefused(lastRefusal) {
			w.Fix = causeOf(vocab.BaoPermissionDenied).Fix
		}
		w.Since, w.person, w.Reason = firstRefusal.At.UTC(), true, lastRefusal.Reason
		return w
	}
	return nil
}

// tokenWhy: a token expired, or expiring before the agent can renew it (nil when neither, and
// when the newest tick would not read the token file: no tick renews or uses that token, and
// status shows it not usable).
func (in Input) tokenWhy(mk maker, nextTick string) *Why {
	rec := in.Rec
	tok := rec.Token
	if tok.Present && tok.Untrusted == "" && !tok.ExpiresAt.IsZero() {
		left := tok.ExpiresAt.Sub(in.Now)
		if left <= 0 {
			w := mk(vocab.TokenExpired, "", fmt.Sprintf("token (%s) expired at %s, last checked %s", tok.Source, machine.Stamp(tok.ExpiresAt), machine.Stamp(tok.CheckedAt)),
				"the next tick ("+nextTick+") finds the token refused and logs in with a bootstrap grant if one is on disk, else blocks", tok.ExpiresAt, in.newestTick())
			w.person = true
			return w
		} else if left < in.tokenWarn() {
			evidence := fmt.Sprintf("token (%s) expires at %s, in %s; last renewed or checked %s", tok.Source, machine.Stamp(tok.ExpiresAt), left.Round(time.Second), machine.Stamp(tok.CheckedAt))
			if e, ok := in.find(func(e store.Entry) bool { return e.Event == machine.NoteLeaseDeferred || e.Event == machine.NoteRenew }); ok {
				evidence += "; the last " + e.Event + " (" + machine.Stamp(e.At) + "): " + trimCode(e.Code, e.Detail)
			}
			w := mk(vocab.TokenExpiring, "", evidence,
				"the agent renews it at every tick; unless a renew or a new lease succeeds before "+machine.Stamp(tok.ExpiresAt)+", the box loses OpenBao then", tok.CheckedAt, in.newestTick())
			w.person = true
			return w
		}
	}
	return nil
}

// outboxWhy: reports waiting in the outbox, stuck or about to be sent again (nil when none).
func (in Input) outboxWhy(mk maker, nextTick string) *Why {
	if len(in.Outbox) > 0 {
		q := in.Outbox[0]
		evidence := fmt.Sprintf("%d report(s) in the outbox; the oldest: %s for %s, queued %s, sent %d time(s)", len(in.Outbox), q.Meta.Result, machine.ShortSha(q.Meta.Sha), machine.Stamp(q.Queued), q.Attempts)
		if e, ok := in.find(func(e store.Entry) bool { return e.Code == vocab.ReportPending }); ok {
			evidence += "; the last answer: " + e.Detail
		}
		if in.outboxStuck(q) {
			w := mk(vocab.OutboxStuck, "", evidence, "the outbox is sent again at every tick (the next "+nextTick+"); tenancy does not know what runs here until it drains", q.Queued, in.newestTick())
			w.person = in.Now.Sub(q.Queued) > in.Limits.stuckAfter()
			return w
		} else {
			return mk(vocab.ReportPending, "", evidence, "the outbox is sent again at the next tick ("+nextTick+")", q.Queued, in.newestTick())
		}
	}
	return nil
}

// stale is the why of a box no tick has run on for longer than stale_after_s: the timer is
// not running (a tick that holds the lock is never stale).
func (in Input) stale(mk maker) *Why {
	last := in.Rec.LastTickAt
	if last.IsZero() || in.Limits.TickRunning {
		return nil
	}
	ago := in.Now.Sub(last)
	if ago <= in.Limits.staleAfter() {
		return nil
	}
	exit := ""
	if t, _, ok := in.newest(); ok && t.Exit != nil {
		exit = fmt.Sprintf(", exit %d", *t.Exit)
	}
	w := mk(vocab.TicksStopped, "", fmt.Sprintf("the last tick ran at %s%s, %s ago (stale_after_s %d); no tick holds the lock now",
		machine.Stamp(last), exit, ago.Round(time.Second), int(in.Limits.staleAfter().Seconds())),
		"nothing happens on this box until the timer runs a tick again: no check-in, no apply, no report", last, in.newestTick())
	w.person = true
	return w
}

// leaseRefusal is the newest entry with tenancy's own answer to a lease (429), else the
// newest that names the code (the agent's own wait).
func (in Input) leaseRefusal() (store.Entry, bool) {
	if e, ok := in.find(func(e store.Entry) bool {
		return e.Code == vocab.LeaseRateLimited && e.Reason != vocab.ReasonAgentWait
	}); ok {
		return e, true
	}
	return in.find(func(e store.Entry) bool { return e.Code == vocab.LeaseRateLimited })
}

// rateLimited is the why of a lease tenancy refused with 429, while its Retry-After lasts.
func (in Input) rateLimited(mk maker) *Why {
	rec := in.Rec
	if !in.Now.Before(rec.LeaseRetryAfter) {
		return nil
	}
	e, ok := in.leaseRefusal()
	evidence := "no lease before " + machine.Stamp(rec.LeaseRetryAfter) + " (tenancy's Retry-After)"
	at, tick := in.Now, in.newestTick()
	if ok {
		evidence = "tenancy's answer: " + trimCode(e.Code, e.Detail) + "; " + evidence
		at, tick = e.At, e.Tick
	}
	return mk(vocab.LeaseRateLimited, "", evidence, "no lease is asked before "+machine.Stamp(rec.LeaseRetryAfter)+"; then the apply goes on by itself", at, tick)
}

// unhealthyWhy is the why of a heartbeat that found a service not running or not healthy, or
// its release no longer what was verified (RELEASE_CHANGED: compose ps was not run).
func (in Input) unhealthyWhy(mk maker, nextTick string) *Why {
	code := heartbeatCode(in.Rec)
	evidence, at := "", in.Now
	var tick uint64
	var reason vocab.Reason
	if e, ok := in.find(func(e store.Entry) bool { return e.Code == code && e.From != e.To }); ok {
		evidence, at, tick, reason = trimCode(e.Code, e.Detail), e.At, e.Tick, e.Reason
	} else if in.Rec.LastReport != nil {
		evidence, at = trimCode(code, in.Rec.LastReport.Detail), in.Rec.LastReport.At
	}
	fault := "the heartbeat found a service not running or not healthy: the box no longer runs what it applied"
	next := "checked again at every tick (the next " + nextTick + "), which heals a service that is down with compose up -d of the applied release (at most heal_budget times an hour; not with heal: false), while one running unhealthy or restarting is reported only; reported failed to tenancy until the service is healthy"
	if code == vocab.Unhealthy && reason == vocab.ReasonPSFailed {
		fault = "the heartbeat could not look at the containers: compose ps failed, so whether the services run is not known"
		next = "checked again at every tick (the next " + nextTick + "); reported failed to tenancy until compose ps answers and the services are healthy"
	}
	if code == vocab.CrashLoop {
		fault = "the applied release keeps going down on this box: the heartbeat healed it heal_budget times in the last hour and found it down again"
		next = "checked again at every tick (the next " + nextTick + "); not healed again until the oldest heal is an hour old; reported failed to tenancy: the service's own logs say why it stops"
	}
	if code == vocab.ReleaseChanged {
		fault = "the heartbeat found the release on disk no longer what was verified (a file of the bundle changed, a symlink was planted in its tree, or its resolved model is missing or not the agent's own), so compose was not run to look at the containers"
		next = "checked again at every tick (the next " + nextTick + "); reported failed to tenancy while the release differs; the agent runs no compose call on it and does not stage it again: restoring the release's files or a new desired sha clears it, `monky-deployd resume` does not"
	}
	w := mk(code, fault, evidence, next, at, tick)
	w.person, w.Reason = true, reason
	return w
}

// baoCode: code is one of OpenBao's own.
func baoCode(code vocab.Code) bool { return strings.HasPrefix(string(code), "BAO_") }

// baoRefused: the entry's cause is OpenBao's refusal of the token (an entry written before
// reasons were kept says so by OpenBao's code alone).
func baoRefused(e store.Entry) bool {
	return e.Reason == vocab.ReasonBaoRefused || (e.Reason == "" && baoCode(e.Code))
}

// heartbeatCode is the code of the heartbeat's failed report: RELEASE_CHANGED when its compose
// ps was refused on a changed release, CRASH_LOOP when its heals were spent, else UNHEALTHY (also for a report written before its
// code was kept).
func heartbeatCode(rec store.Record) vocab.Code {
	if rec.LastReport != nil && (rec.LastReport.Code == vocab.ReleaseChanged || rec.LastReport.Code == vocab.CrashLoop) {
		return rec.LastReport.Code
	}
	return vocab.Unhealthy
}

// implausibleNeed is a disk need no bundle has: its declared size is wrong, not the disk.
const implausibleNeed = 16 << 40

// clears says what clears a refusal of code, truthfully: the same bundle is refused again.
func clears(code vocab.Code) string {
	if c := causeOf(code); c.Clears != "" {
		return c.Clears
	}
	return "a new desired sha clears it; `monky-deployd resume` checks the same bundle again and refuses it again"
}

// pullKinds are the kinds of pull fault by their typed cause (docker.PullReason read the
// registry's words once): the fault, and the one command that checks it ("" keeps the code's
// fix).
var pullKinds = map[vocab.Reason]struct{ fault, fix string }{
	vocab.ReasonRegistryDenied: {"the registry refused the pull: the agent's credential is missing or wrong (a `docker login` by hand is invisible to it)", ""},
	vocab.ReasonImageMissing: {"the registry does not hold an image the bundle names (tag or repository absent)",
		pullAgain + "   # the pull the agent ran, as its user and with its credential: compose names the image the registry does not hold; the tag must exist there, else fix the bundle's compose.yaml"},
	vocab.ReasonRegistryDNS: {"the registry's name does not resolve on this box",
		pullAgain + "   # the pull the agent ran, as its user: compose names the registry whose name does not resolve; the box's DNS (/etc/resolv.conf, the mesh's resolver) must resolve it"},
	vocab.ReasonNetwork: {"the registry could not be reached or did not answer in time", ""},
}

// pullAgain is the pull the agent ran for the desired sha, as a person runs it: its user, its
// docker directory, the release's resolved model and directory, the project (docker.CLI's pin).
const pullAgain = "sudo -u {user} env DOCKER_CONFIG={state_dir}/docker docker compose -f {deploy_dir}/resolved/{sha}.yaml --env-file {deploy_dir}/resolved/empty.env --project-directory {deploy_dir}/releases/{sha} -p {project} pull"

// pullKind is the fault and the command of a pull fault's cause, or the code's fault and ""
// for a cause it has no words for (a failure written before causes were kept).
func pullKind(r vocab.Reason) (fault, fix string) {
	if k, ok := pullKinds[r]; ok {
		return k.fault, k.fix
	}
	return causeOf(vocab.ComposePullFailed).Fault, ""
}

// firstFailure is when the failures of f's sha and code began: the oldest failed transition of
// them in the recent ticks, else f's own time.
func (in Input) firstFailure(f *store.Failure) time.Time {
	since := f.At
	for i := len(in.Recent) - 1; i >= 0; i-- {
		for _, e := range in.Entries[in.Recent[i].Tick] {
			if e.Event == machine.EvFail && e.Code == f.Code && e.From != e.To && e.At.Before(since) {
				since = e.At
			}
		}
	}
	return since
}

// temporary is the newest tick's note about a step that could not go on now, when the tick
// did not end well.
func (in Input) temporary() (store.Entry, bool) {
	sum, last, ok := in.newest()
	if !ok || sum.Exit == nil || *sum.Exit == vocab.ExitOK {
		return store.Entry{}, false
	}
	for i := len(last) - 1; i >= 0; i-- {
		e := last[i]
		if _, ok := temporaryEvents[e.Event]; ok {
			return e, true
		}
		if e.From != e.To { // a transition after the note: the tick went on
			return store.Entry{}, false
		}
	}
	return store.Entry{}, false
}

// repeated75 counts the newest ticks in a row that ended exit 75 (folded ticks count), and
// when the first of them started.
//
// The record's run (store.Record.Temporary) counts from its first tick, durably; the headers kept
// count only the newest ticks, so the older of the two is the run's start.
func (in Input) repeated75() (int, time.Time) {
	n := 0
	var since time.Time
	for i := len(in.Recent) - 1; i >= 0; i-- {
		t := in.Recent[i]
		if t.Exit == nil || *t.Exit != vocab.ExitTemporary {
			break
		}
		n += 1 + int(t.Folded)
		since = t.StartedAt
	}
	if run := in.Rec.Temporary; run.Ticks >= n && !run.Since.IsZero() {
		n, since = run.Ticks, run.Since
	}
	return n, since
}

// leasingTicks counts the newest ticks in a row that asked a lease (a folded tick counts as
// the ticks it stands for when as many leases fall in its span).
func (in Input) leasingTicks() int {
	n := 0
	for i := len(in.Recent) - 1; i >= 0; i-- {
		t := in.Recent[i]
		end := t.EndedAt
		if t.LastAt.After(end) {
			end = t.LastAt
		}
		if end.IsZero() {
			end = t.StartedAt.Add(time.Hour)
		}
		asked := 0
		for _, l := range in.Leases {
			if !l.At.Before(t.StartedAt) && !l.At.After(end) {
				asked++
			}
		}
		k := 1 + int(t.Folded)
		if asked < k {
			break
		}
		n += k
	}
	return n
}

// outboxStuck: a report sent three times, or waiting three intervals, is not a blip.
func (in Input) outboxStuck(q store.QueuedReport) bool {
	return q.Attempts >= 3 || in.Now.Sub(q.Queued) >= 3*in.interval()
}

// recentCount is how many ticks the recent headers stand for, folded ones included.
func (in Input) recentCount() int {
	n := 0
	for _, t := range in.Recent {
		n += 1 + int(t.Folded)
	}
	return n
}

// find is the newest entry of the recent ticks that match says yes to.
func (in Input) find(match func(store.Entry) bool) (store.Entry, bool) {
	for i := len(in.Recent) - 1; i >= 0; i-- {
		es := in.Entries[in.Recent[i].Tick]
		for j := len(es) - 1; j >= 0; j-- {
			if match(es[j]) {
				return es[j], true
			}
		}
	}
	return store.Entry{}, false
}

func (in Input) tickWhere(match func(store.Entry) bool) uint64 {
	e, _ := in.find(match)
	return e.Tick
}

// tickOf is the tick of the newest transition that committed code.
func (in Input) tickOf(code vocab.Code) uint64 {
	return in.tickWhere(func(e store.Entry) bool { return e.Code == code && e.From != e.To })
}

func (in Input) newestTick() uint64 {
	t, _, _ := in.newest()
	return t.Tick
}

// interval is the time between two ticks: tenancy's checkin_interval_s, else the timer's minute.
func (in Input) interval() time.Duration {
	if in.Rec.IntervalS > 0 {
		return time.Duration(in.Rec.IntervalS) * time.Second
	}
	return time.Minute
}

// tokenWarn is how close to its expiry a token counts as dying: the agent renews far earlier
// (renew_below_s, 6 h by default), so a token this close was not kept alive.
func (in Input) tokenWarn() time.Duration {
	return max(15*time.Minute, 5*in.interval())
}

// nextTickWords says when the next tick is due: the timer's minute (or tenancy's interval)
// after the last one.
func (in Input) nextTickWords() string {
	if in.Rec.LastTickAt.IsZero() {
		return "within a minute"
	}
	return "about " + machine.Stamp(in.Rec.LastTickAt.Add(in.interval()))
}

// privilegedFault words a PRIVILEGED_REFUSED whose reason is vocab.ReasonUnlistedField: the
// policy refused only fields its allowlist does not name and that were not kept off it for
// what they would do (those carry no such reason, and their findings say what they would do),
// and the fault says so (the evidence names the fields). "" for any other code or reason, and for a refusal written
// before reasons were kept (the cause's words then hold).
func privilegedFault(code vocab.Code, reason vocab.Reason) string {
	if code != vocab.PrivilegedRefused || reason != vocab.ReasonUnlistedField {
		return ""
	}
	return "the compose file sets only fields the allowlist of what a service may hold does not name (the evidence names them, and says what one found harmless would do): such a field is refused until PROTOCOL.md §2 lists it, after docs/SECURITY.md (\"Fields decided\") has found what it can reach; the bundle's `agent` profile does not allow it"
}

// composeInstall installs compose v2 on a Debian box whose docker CLI lacks it: the package
// docker-compose-plugin where Docker's apt repository is configured (Debian 12's own archive
// has no compose v2), else the static plugin where the docker CLI looks for its plugins.
const composeInstall = "sudo apt-get install -y docker-compose-plugin || { sudo mkdir -p /usr/libexec/docker/cli-plugins && " +
	"sudo curl -fsSL -o /usr/libexec/docker/cli-plugins/docker-compose \"https://github.com/docker/compose/releases/latest/download/docker-compose-linux-$(uname -m)\" && " +
	"sudo chmod 0755 /usr/libexec/docker/cli-plugins/docker-compose; }" +
	"   # docker-compose-plugin is in Docker's apt repository (download.docker.com), not in Debian 12's; without that repository, the static plugin; the next tick checks again"

// composeMissing words a DOCKER_NOT_FOUND whose reason is vocab.ReasonComposeMissing: the docker
// CLI is there, compose v2 is not; its fix installs compose v2. "" for any other code or reason
// (the code's own words: the CLI is not there).
func composeMissing(code vocab.Code, reason vocab.Reason) (fault, fix string) {
	if code != vocab.DockerNotFound || reason != vocab.ReasonComposeMissing {
		return "", ""
	}
	return "the docker CLI (docker_bin) is there but compose v2 is not: `docker compose version` found no compose v2 plugin (none, or compose v1 alone), so compose could not run", composeInstall
}

func trimCode(code vocab.Code, detail string) string {
	if code != "" {
		detail = strings.TrimPrefix(detail, string(code)+": ")
		detail = strings.TrimPrefix(detail, "still refused: "+string(code)+": ")
		detail = strings.TrimPrefix(detail, "still blocked: ")
	}
	return detail
}

func sentence(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return s
	}
	s = strings.ToUpper(s[:1]) + s[1:]
	if !strings.HasSuffix(s, ".") {
		s += "."
	}
	return s
}

// causeOf is code's row of the vocabulary's registry of causes (the zero Cause for a code the
// agent does not know).
func causeOf(code vocab.Code) vocab.Cause {
	c, _ := vocab.CauseOf(code)
	return c
}

// roundAge is how long a fault has lasted, in the unit a person reads it: seconds under a
// minute, minutes after.
func roundAge(d time.Duration) time.Duration {
	if d < time.Minute {
		return d.Round(time.Second)
	}
	return d.Round(time.Minute)
}
