package explain

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/tikali/monky-deployd/machine"
)

// WriteText prints the journal newest last, then the state and what happens next.
func WriteText(w io.Writer, d Doc) {
	env := d.EnvID
	if env == "" {
		env = "(env unknown)"
	}
	fmt.Fprintf(w, "monky-deployd explain — %s\n", env)
	if d.AsOf != nil {
		if d.sent {
			fmt.Fprintf(w, "a copy, read as of %s (--as-of), not of its newest tick\n", machine.Stamp(*d.AsOf))
		} else {
			fmt.Fprintf(w, "a copy, read as of its newest tick: %s\n", machine.Stamp(*d.AsOf))
		}
	}
	if d.Since != "" {
		from := "now"
		if d.AsOf != nil {
			from = "the file's newest tick"
		}
		fmt.Fprintf(w, "ticks of the last %s before %s\n", d.Since, from)
	}
	switch {
	case len(d.Ticks) == 0 && d.Since != "":
		fmt.Fprintf(w, "\nno tick in that window (drop --since, or widen it)\n")
	case len(d.Ticks) == 0:
		fmt.Fprintln(w, "\nno tick has run yet")
	}
	for _, t := range d.Ticks {
		writeTick(w, t)
	}
	verdict := VerdictWords(d.Verdict)
	if len(d.Codes) > 0 {
		verdict += " (" + strings.Join(d.Codes, ", ") + ")"
	}
	fmt.Fprintf(w, "\nstate: %s\nnext:  %s\nverdict: %s\n", d.State, d.Next, verdict)
	if d.Why != nil {
		WriteWhy(w, *d.Why)
	}
	for _, a := range d.Also {
		WriteWhy(w, a)
	}
}

// writeTick writes one tick of the explanation: its header line, and its transitions in a table.
func writeTick(w io.Writer, t Tick) {
	exit := "running or killed"
	if t.Exit != nil {
		exit = fmt.Sprintf("exit %d", *t.Exit)
	}
	action := t.Action
	if action == "" {
		action = "-"
	}
	fmt.Fprintf(w, "\ntick %d  %s  action %s  desired %s  applied %s  %s\n", t.Tick, machine.Stamp(t.StartedAt), action, machine.ShortSha(t.DesiredSha), machine.ShortSha(t.AppliedSha), exit)
	if t.Folded > 0 && t.LastAt != nil {
		word := "ticks"
		if t.Folded == 1 {
			word = "tick"
		}
		fmt.Fprintf(w, "  (and %d more %s like it, the last at %s)\n", t.Folded, word, machine.Stamp(*t.LastAt))
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, tr := range t.Transitions {
		step := tr.From + " → " + tr.To
		if tr.From == tr.To {
			step = tr.From + " · " + tr.Event
		}
		detail := tr.Detail
		if c := string(tr.Code); c != "" && !strings.HasPrefix(detail, c) && !strings.Contains(detail, c+":") {
			detail = c + ": " + detail
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", machine.Stamp(tr.At), step, duration(tr.Ms), detail)
	}
	tw.Flush()
}

// WriteWhy prints the why block: the code, the fault, the evidence, what happens next and the
// one command that fixes or checks it.
func WriteWhy(w io.Writer, y Why) {
	at := ""
	if !y.At.IsZero() {
		at = " (" + machine.Stamp(y.At)
		if y.Tick > 0 {
			at += fmt.Sprintf(", tick %d", y.Tick)
		}
		at += ")"
	}
	fmt.Fprintf(w, "\nwhy: %s%s\n", y.Code, at)
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)
	fmt.Fprintf(tw, "  fault:\t%s\n", y.Fault)
	if y.Evidence != "" {
		fmt.Fprintf(tw, "  evidence:\t%s\n", y.Evidence)
	}
	fmt.Fprintf(tw, "  next:\t%s\n", y.Next)
	fmt.Fprintf(tw, "  fix:\t%s\n", y.Fix)
	tw.Flush()
}

// duration is a step's wall time: milliseconds under ten seconds, else seconds with one decimal.
func duration(ms int64) string {
	if ms < 10000 {
		return fmt.Sprintf("%dms", ms)
	}
	return fmt.Sprintf("%.1fs", float64(ms)/1000)
}
