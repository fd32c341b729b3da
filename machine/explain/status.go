package explain

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/internal/vocab"
	"github.com/tikali/monky-deployd/machine"
	"github.com/tikali/monky-deployd/store"
)

// TokenStatus describes the bearer, never its value.
type TokenStatus struct {
	Present bool `json:"present"`
	// Untrusted is why the agent will not read the token file it has (a symlink, not a
	// regular file, group- or world-writable): the file is there, but no tick uses it.
	Untrusted string     `json:"untrusted,omitempty"`
	Source    string     `json:"source,omitempty"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	// Expired: the state file's expiry is past (as of now, or of a copy's newest tick).
	Expired bool `json:"expired,omitempty"`
}

// Budget is the lease budget.
type Budget struct {
	Used    int        `json:"used"`
	Limit   int        `json:"limit"`
	WindowS int        `json:"window_s"`
	FreesAt *time.Time `json:"frees_at"`
}

// Status is `status --json`.
type Status struct {
	Schema        int               `json:"schema"`
	EnvID         string            `json:"env_id"`
	State         string            `json:"state"`
	Next          string            `json:"next"`
	AppliedSha    string            `json:"applied_sha"`
	DesiredSha    string            `json:"desired_sha"`
	Token         TokenStatus       `json:"token"`
	LastCheckinAt *time.Time        `json:"last_checkin_at"`
	LastReport    *store.LastReport `json:"last_report"`
	LeaseBudget   Budget            `json:"lease_budget"`
	// LeaseRetryAfter is tenancy's Retry-After after it refused a lease (429): no lease is
	// asked before it. Null when none holds.
	LeaseRetryAfter *time.Time        `json:"lease_retry_after"`
	Attempts        int               `json:"attempts"`
	AttemptsBy      map[string]int    `json:"attempts_by_state,omitempty"`
	NextRetryAt     *time.Time        `json:"next_retry_at"`
	Parked          bool              `json:"parked"`
	Refusal         *store.Refusal    `json:"refusal,omitempty"`
	Failure         *store.Failure    `json:"failure,omitempty"`
	Block           *store.Block      `json:"block,omitempty"`
	Outbox          int               `json:"outbox"`
	Containers      []store.Container `json:"containers"`
	LastTickAt      *time.Time        `json:"last_tick_at"`
	LastExit        int               `json:"last_exit"`
	TickRunning     bool              `json:"tick_running"`
	// Host is the box's name as its newest tick recorded it ("" in a file an older agent wrote).
	Host string `json:"host,omitempty"`
	// Who must act when the box needs a person: box (its operator), publisher (the bundle's
	// author), openbao or tenancy; "" when nobody must (the agent goes on by itself).
	Who string `json:"who,omitempty"`
	// ParksAt is the earliest a failed flight that still retries parks, should every retry
	// fail as it did (null when it is parked or not failed).
	ParksAt *time.Time `json:"parks_at,omitempty"`
	// Hold is a person's hold that lasts now (monky-deployd hold), nil when none.
	Hold *store.Hold `json:"hold,omitempty"`
	// Verdict is converged, working or needs_person: status exits 1 on needs_person.
	Verdict string `json:"verdict"`
	// Codes are every active code, Why's first.
	Codes []string `json:"codes"`
	// Converged is true only when the box runs what tenancy wants and nothing is wrong.
	Converged bool `json:"converged"`
	// Why is explain's why block: the first thing wrong, its evidence, what happens next, the
	// fix; Also are the other active codes' blocks.
	Why  *Why  `json:"why"`
	Also []Why `json:"also,omitempty"`
	// AsOf is set when a copy is read: the file's newest tick, which stands for "now".
	AsOf *time.Time `json:"as_of,omitempty"`
	// MovedAside is the corrupt state file this one replaced (where the copy is), nil when none.
	MovedAside *store.MovedAside `json:"state_file_moved_aside"`
	// Salvaged is set when the file is corrupt and was read as far as it could be (through an
	// older meta page, or its sound pages only): what follows lacks what it lost.
	Salvaged *store.Salvaged `json:"salvaged,omitempty"`
	// leaseRefusal is tenancy's own words when it refused a lease (429).
	leaseRefusal string
	// sent: AsOf is the time given (--as-of), not the copy's newest tick.
	sent bool
}

// NeedsPerson reports whether status exits 1: the verdict is needs_person.
func (s Status) NeedsPerson() bool { return s.Verdict == NeedsPerson }

func ptime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

// BuildStatus reads where the box stands, with the default limits. tokenPresent is whether
// the token file exists (nil: take the state file's word, as on a support copy).
func BuildStatus(st store.Store, now time.Time, tokenPresent *bool) (Status, error) {
	return BuildStatusWith(st, now, tokenPresent, Limits{})
}

// BuildStatusWith reads where the box stands with the box's limits (stuck_after_s,
// stale_after_s, whether a tick holds the lock, its paths).
func BuildStatusWith(st store.Store, now time.Time, tokenPresent *bool, lim Limits) (Status, error) {
	var s Status
	err := st.View(func(tx store.Tx) error {
		in, err := ReadWith(tx, now, lim)
		if err != nil {
			return err
		}
		rec, used, frees, q := in.Rec, in.Used, in.Frees, in.Outbox
		v := Decide(in)
		s = Status{Schema: Schema, EnvID: rec.EnvID, State: stateOf(rec), Next: v.Next, Converged: v.Converged, Why: v.Why, Also: v.Also,
			Verdict: v.Verdict, Codes: v.Codes, TickRunning: lim.TickRunning,
			AppliedSha: rec.AppliedSha, DesiredSha: rec.DesiredSha,
			Token:         tokenStatus(rec.Token),
			LastCheckinAt: ptime(rec.LastCheckinAt), LastReport: rec.LastReport,
			LeaseBudget: Budget{Used: used, Limit: LeaseLimit, WindowS: int(LeaseWindow.Seconds()), FreesAt: ptime(frees)},
			AttemptsBy:  rec.Attempts, NextRetryAt: ptime(rec.NextRetryAt), Parked: rec.Parked,
			Refusal: rec.Refusal, Failure: rec.Failure, Block: rec.Block, Outbox: len(q),
			Containers: rec.Containers, LastTickAt: ptime(rec.LastTickAt), LastExit: rec.LastExit}
		s.Attempts = rec.TotalAttempts()
		if rec.Hold.Active(in.Now) {
			h := *rec.Hold
			s.Hold = &h
		}
		s.Host, s.ParksAt = rec.Box.Host, ptime(machine.ParksAt(rec))
		if v.NeedsPerson() && v.Why != nil {
			s.Who = v.Why.Who
		}
		if now.Before(rec.LeaseRetryAfter) {
			s.LeaseRetryAfter = ptime(rec.LeaseRetryAfter)
			if e, ok := in.leaseRefusal(); ok {
				s.leaseRefusal = trimCode(e.Code, e.Detail)
			}
		}
		s.Token.Expired = s.Token.Present && !rec.Token.ExpiresAt.IsZero() && !now.Before(rec.Token.ExpiresAt)
		return nil
	})
	if tokenPresent != nil && s.Token.Untrusted == "" {
		s.Token.Present = *tokenPresent
		if !s.Token.Present {
			s.Token.Source, s.Token.ExpiresAt, s.Token.Expired = "", nil, false
		}
	}
	if s.Containers == nil {
		s.Containers = []store.Container{}
	}
	if s.Codes == nil {
		s.Codes = []string{}
	}
	if err == nil {
		s.MovedAside, err = movedAside(st)
	}
	return s, err
}

// tokenStatus is the token as the record has it: one the newest tick would not read (its file
// untrusted) is not present, whatever the record knew of it before.
func tokenStatus(t store.TokenMeta) TokenStatus {
	if t.Untrusted != "" {
		return TokenStatus{Untrusted: t.Untrusted}
	}
	return TokenStatus{Present: t.Present, Source: t.Source, ExpiresAt: ptime(t.ExpiresAt)}
}

// BuildStatusCopy reads a copy of a state file a box sent in: as of its newest tick, with the
// file's word on the token (nothing about the machine reading it).
func BuildStatusCopy(st store.Store) (Status, error) { return BuildStatusCopyAsOf(st, time.Time{}) }

// BuildStatusCopyAsOf reads a copy as of at (zero: its newest tick): a copy read as of when
// the box sent it shows a stopped timer.
func BuildStatusCopyAsOf(st store.Store, at time.Time) (Status, error) {
	sent := !at.IsZero()
	if at.IsZero() {
		var err error
		if at, err = AsOf(st); err != nil {
			return Status{}, err
		}
	}
	s, err := BuildStatus(st, at, nil)
	s.sent = sent
	if !at.IsZero() {
		u := at.UTC()
		s.AsOf = &u
	}
	return s, err
}

// WriteStatusText prints status for a person: the one thing wrong first, then aligned facts.
func WriteStatusText(w io.Writer, s Status) {
	writeStatusHead(w, s)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, v) }
	row("env", s.EnvID)
	if s.Host != "" {
		row("host", s.Host)
	}
	verdict := VerdictWords(s.Verdict)
	if len(s.Codes) > 0 {
		verdict += " (" + strings.Join(s.Codes, ", ") + ")"
	}
	row("verdict", verdict)
	row("state", s.State)
	row("next", s.Next)
	if s.Who != "" {
		row("who acts", s.Who)
	}
	if s.Hold != nil {
		row("held", fmt.Sprintf("until %s by %s: %s (monky-deployd hold --release ends it)", machine.Stamp(s.Hold.Until), s.Hold.By, s.Hold.Reason))
	}
	row("applied", machine.ShortSha(s.AppliedSha))
	row("desired", machine.ShortSha(s.DesiredSha))
	row("token", tokenWords(s))
	row("last check-in", when(s.LastCheckinAt))
	row("last report", lastReportWords(s))
	lb := fmt.Sprintf("%d/%d this hour", s.LeaseBudget.Used, s.LeaseBudget.Limit)
	if s.LeaseBudget.FreesAt != nil && s.LeaseBudget.Used > 0 {
		lb += ", a slot frees at " + machine.Stamp(*s.LeaseBudget.FreesAt)
	}
	row("lease budget", lb)
	if s.LeaseRetryAfter != nil {
		words := "tenancy refused a lease"
		if s.leaseRefusal != "" {
			words += " (" + s.leaseRefusal + ")"
		}
		row("lease", words+"; none is asked before "+machine.Stamp(*s.LeaseRetryAfter))
	}
	if s.Attempts > 0 {
		row("attempts", fmt.Sprintf("%d%s", s.Attempts, map[bool]string{true: " (parked)", false: ""}[s.Parked]))
		if s.NextRetryAt != nil && !s.Parked {
			row("next retry", machine.Stamp(*s.NextRetryAt))
			if s.ParksAt != nil {
				row("parks at", machine.Stamp(*s.ParksAt)+" at the earliest, if every retry fails")
			}
		}
	}
	if s.Outbox > 0 {
		row("outbox", fmt.Sprintf("%d report(s) waiting", s.Outbox))
	}
	row("last tick", fmt.Sprintf("%s, exit %d%s", when(s.LastTickAt), s.LastExit, map[bool]string{true: " (a tick is running now)", false: ""}[s.TickRunning]))
	tw.Flush()
	if s.Why != nil {
		WriteWhy(w, *s.Why)
	}
	for _, a := range s.Also {
		WriteWhy(w, a)
	}
	writeContainers(w, s.Containers)
}

// writeStatusHead writes what status says before its table: the copy's time, a state file
// started afresh, the problem a person should know first.
func writeStatusHead(w io.Writer, s Status) {
	if s.AsOf != nil {
		if s.sent {
			fmt.Fprintf(w, "a copy, read as of %s (--as-of), not of its newest tick\n\n", machine.Stamp(*s.AsOf))
		} else {
			fmt.Fprintf(w, "a copy, read as of its newest tick: %s\n\n", machine.Stamp(*s.AsOf))
		}
	}
	if m := s.MovedAside; m != nil {
		fmt.Fprintf(w, "%s\n\n", MovedAsideWords(m))
	}
	if p := problem(s); p != "" {
		fmt.Fprintf(w, "!! %s\n\n", p)
	}
}

// tokenWords is the status table's token row.
func tokenWords(s Status) string {
	tok := "absent"
	if s.Token.Untrusted != "" {
		return "not usable: " + s.Token.Untrusted + " — the agent does not read it (the journal names the fix)"
	}
	if s.Token.Present {
		tok = "present (" + s.Token.Source + ")"
		if s.Token.ExpiresAt != nil {
			tok += ", expires " + machine.Stamp(*s.Token.ExpiresAt)
		}
	}
	switch {
	case s.Token.Present && s.Token.Expired:
		tok += " — EXPIRED"
	case s.Token.Present && s.Why != nil && s.Why.Code == vocab.TokenExpiring:
		tok += " — expiring, not kept alive"
	}
	return tok
}

// lastReportWords is the status table's last report row.
func lastReportWords(s Status) string {
	if s.LastReport != nil {
		ack := "not yet acknowledged"
		if s.LastReport.Acknowledged {
			ack = "acknowledged"
		}
		return fmt.Sprintf("%s %s at %s, %s", s.LastReport.Result, machine.ShortSha(s.LastReport.Sha), machine.Stamp(s.LastReport.At), ack)
	}
	return "never"
}

// writeContainers writes the containers as of the last check-in, by name.
func writeContainers(w io.Writer, containers []store.Container) {
	if len(containers) > 0 {
		fmt.Fprintln(w, "\ncontainers (at the last check-in):")
		cs := append([]store.Container(nil), containers...)
		sort.Slice(cs, func(i, j int) bool { return cs[i].Name < cs[j].Name })
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		for _, c := range cs {
			h := c.Health
			if h == "" {
				h = "-"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", c.Service, c.Name, c.State, h)
		}
		tw.Flush()
	}
}

func when(t *time.Time) string {
	if t == nil {
		return "never"
	}
	return machine.Stamp(*t)
}

func problem(s Status) string {
	switch {
	case s.Why != nil:
		return string(s.Why.Code) + ": " + strings.TrimSuffix(s.Why.Fault, ".")
	case s.Block != nil:
		return "blocked: " + string(s.Block.Code) + ": " + s.Block.Detail
	case s.Refusal != nil && s.State == string(machine.Refused):
		return "refused: " + string(s.Refusal.Code) + ": " + s.Refusal.Detail
	case s.Failure != nil && s.State == string(machine.Failed):
		return "failed: " + string(s.Failure.Code) + ": " + s.Failure.Detail
	case s.Token.Untrusted != "":
		return "the token file is not trusted: " + s.Token.Untrusted + " — the agent does not read it"
	case !s.Token.Present:
		return "no OpenBao token: the next tick logs in with the bootstrap grant, or needs the install kit"
	case s.LastReport != nil && s.LastReport.Result == effects.ResultFailed:
		return "last report failed: " + s.LastReport.Detail
	}
	if strings.HasPrefix(s.Next, "lease budget") {
		return s.Next
	}
	if s.Verdict == NeedsPerson {
		return "needs a person: " + s.Next
	}
	return ""
}

// MovedAsideWords says that a state file replaced a corrupt one, and what the fresh file lost.
func MovedAsideWords(m *store.MovedAside) string {
	return fmt.Sprintf("state file: started afresh at %s; the corrupt one (%s) is kept at %s — this file holds nothing from before: "+
		"the journal, the attempts, a refusal or block, the lease budget's count and the reports waiting in the outbox are in the corrupt one "+
		"(monky-deployd explain --state-file %s reads what it can of it)",
		m.At.UTC().Format(time.RFC3339), m.Problem, m.Path, shellQuote(m.Path))
}

// SalvageWords say how a corrupt copy was read (store.Salvage) and what the reading lacks; aside:
// the copy is one the agent moved aside (the box runs on a fresh file).
func SalvageWords(path string, s store.Salvaged, aside bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "state file %s is corrupt: %s.", path, s.Problem)
	if aside {
		b.WriteString(" It is a copy the agent moved aside: the box runs on a fresh state file beside it, which holds nothing of what this one did.")
	}
	switch {
	case s.Older():
		fmt.Fprintf(&b, " Read through its older meta page (commit %d): the newest commit (%d), the last tick's writes, is lost to this reading.", s.TxID, s.Newest)
	default:
		fmt.Fprintf(&b, " Read through its newest meta page (commit %d).", s.TxID)
	}
	if !s.Whole {
		fmt.Fprintf(&b, " Only what lies on sound pages reads (%s): what follows may lack ticks.", s.Lost)
	}
	return b.String()
}
