package explain

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

func stamp(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05Z") }

// WriteText prints the journal newest last, then the state and what happens next.
func WriteText(w io.Writer, d Doc) {
	env := d.EnvID
	if env == "" {
		env = "(env unknown)"
	}
	fmt.Fprintf(w, "monky-deployd explain — %s\n", env)
	if len(d.Ticks) == 0 {
		fmt.Fprintln(w, "\nno tick has run yet")
	}
	for _, t := range d.Ticks {
		exit := "running or killed"
		if t.Exit != nil {
			exit = fmt.Sprintf("exit %d", *t.Exit)
		}
		action := t.Action
		if action == "" {
			action = "-"
		}
		fmt.Fprintf(w, "\ntick %d  %s  action %s  desired %s  applied %s  %s\n", t.Tick, stamp(t.StartedAt), action, short(t.DesiredSha), short(t.AppliedSha), exit)
		if t.Folded > 0 && t.LastAt != nil {
			fmt.Fprintf(w, "  (and %d more ticks like it, the last at %s)\n", t.Folded, stamp(*t.LastAt))
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		for _, tr := range t.Transitions {
			step := tr.From + " → " + tr.To
			if tr.From == tr.To {
				step = tr.From + " · " + tr.Event
			}
			detail := tr.Detail
			if tr.Code != "" && !strings.HasPrefix(detail, tr.Code) && !strings.Contains(detail, tr.Code+":") {
				detail = tr.Code + ": " + detail
			}
			fmt.Fprintf(tw, "  %s\t%s\t%dms\t%s\n", tr.At.UTC().Format("15:04:05"), step, tr.Ms, detail)
		}
		tw.Flush()
	}
	fmt.Fprintf(w, "\nstate: %s\nnext:  %s\n", d.State, d.Next)
	if d.Why != nil {
		WriteWhy(w, *d.Why)
	}
}

// WriteWhy prints the why block: the code, the fault, the evidence, what happens next and the
// one command that fixes or checks it.
func WriteWhy(w io.Writer, y Why) {
	at := ""
	if !y.At.IsZero() {
		at = " (" + stamp(y.At)
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
