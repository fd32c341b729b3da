package states

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/effects/files"
	"github.com/tikali/monky-deployd/internal/model"
	"github.com/tikali/monky-deployd/internal/sanitize"
	"github.com/tikali/monky-deployd/internal/vocab"
	"github.com/tikali/monky-deployd/machine"
	"github.com/tikali/monky-deployd/store"
)

// judgement is what the engine's listing says of the applied release, judged against the
// services of its checked model (AGENT.md, amendments of 2026-12-04: "Green means serving").
type judgement struct {
	bad       []string      // every service not serving, named with what was found, sorted
	down      []string      // of them, those with no container running (none, exited): compose up starts them
	final     []string      // of them, those exited that the engine never restarts (restart "no"): no wait helps
	completed []string      // one-shots that exited 0
	settling  time.Duration // the longest a running service still has to stay up for min_healthy_s
	young     []string      // the services still settling, named with how long they have been up, sorted
	again     []string      // of the bad, those running again after a restart since the last look (restarts)
	serving   int           // services running (healthy where they have a healthcheck)
}

func (j judgement) ok() bool { return len(j.bad) == 0 }

// words are the judgement as a person reads it: "2/2 services healthy", with the one-shots
// that completed.
func (j judgement) words() string {
	n := j.serving + len(j.completed)
	w := fmt.Sprintf("%d/%d services healthy", j.serving, n+len(j.bad)-len(j.completed))
	if len(j.completed) > 0 {
		w += fmt.Sprintf(", %d completed (%s)", len(j.completed), strings.Join(j.completed, ", "))
	}
	return w
}

// judge accounts for every service of the model (services; nil when the release was staged
// before the agent kept them: then the services compose lists) in cs, compose ps --all's
// listing. A service with no container, one exited (a one-shot's exit 0 is completed), one
// restarting, or one running unhealthy is bad and named. minUp is min_healthy_s: a running
// service up for less is settling (the gate waits; a restart starts its time again).
//
// again are the containers that restarted since the last look (restarts, by ID): running, each
// is bad all the same, named with what was seen.
func judge(cs []effects.Container, services []model.Service, minUp time.Duration, again map[string]string) judgement {
	if services == nil {
		seen := map[string]bool{}
		for _, c := range cs {
			if name := serviceOf(c); !seen[name] {
				seen[name] = true
				services = append(services, model.Service{Name: name, Replicas: 1})
			}
		}
	}
	byService := map[string][]effects.Container{}
	for _, c := range cs {
		byService[serviceOf(c)] = append(byService[serviceOf(c)], c)
	}
	var j judgement
	for _, s := range services {
		mine := byService[s.Name]
		if len(mine) == 0 {
			if s.Replicas > 0 {
				j.bad = append(j.bad, s.Name+" (no container)")
				j.down = append(j.down, s.Name)
			}
			continue
		}
		var worst string
		done, up, stopped, final, restarted := true, true, false, false, false
		var youngest time.Duration = -1
		for _, c := range mine {
			switch {
			case c.State == "exited" && s.OneShot && c.ExitCode == 0:
			case c.State == "exited" || c.State == "dead" || c.State == "created":
				done, up, stopped = false, false, true
				worst = fmt.Sprintf("%s (exited %d)", s.Name, c.ExitCode)
				final = final || s.NoRestart && c.State != "created"
			case c.State == "restarting":
				done, up = false, false
				worst = s.Name + " (restarting: a crash loop)"
			case c.State != "running":
				done, up = false, false
				worst = fmt.Sprintf("%s (%s)", s.Name, c.State)
			case again[c.ID] != "": // restarted: its healthcheck starts again too
				done, up, restarted = false, false, true
				worst = again[c.ID]
			case c.Health != "" && c.Health != "healthy":
				done, up = false, false
				worst = fmt.Sprintf("%s (running/%s)", s.Name, c.Health)
			default:
				done = false
				if up, _ := upFor(c.Status); up < minUp {
					j.settling = max(j.settling, minUp-up)
					if youngest < 0 || up < youngest {
						youngest = up
					}
				}
			}
		}
		switch {
		case worst != "":
			j.bad = append(j.bad, worst)
			if stopped {
				j.down = append(j.down, s.Name)
			}
			if final {
				j.final = append(j.final, worst)
			}
			if restarted && !stopped {
				j.again = append(j.again, s.Name)
			}
		case done:
			j.completed = append(j.completed, s.Name)
		case up:
			j.serving++
			if youngest >= 0 {
				j.young = append(j.young, fmt.Sprintf("%s (up %ds of %ds)", s.Name, int(youngest.Seconds()), int(minUp.Seconds())))
			}
		}
	}
	sort.Strings(j.bad)
	sort.Strings(j.young)
	return j
}

func serviceOf(c effects.Container) string {
	if c.Service != "" {
		return c.Service
	}
	return c.Name
}

// upFor is how long a running container has been up, from compose's Status ("Up 2 minutes
// (healthy)", docker's human durations: go-units' HumanDuration), as bounds: at least low, at
// most high (the words round down, the hours to the nearest). A Status that says nothing of it
// (a listing without the field) is taken as long settled: both bounds are the longest duration.
func upFor(status string) (low, high time.Duration) {
	settled := time.Duration(math.MaxInt64)
	rest, ok := strings.CutPrefix(status, "Up ")
	if !ok {
		return settled, settled
	}
	rest, _, _ = strings.Cut(rest, " (")
	switch rest = strings.TrimSpace(rest); rest {
	case "Less than a second":
		return 0, time.Second
	case "About a minute":
		return time.Minute, 2 * time.Minute
	case "About an hour":
		return time.Hour, 90 * time.Minute
	}
	n, unit, ok := strings.Cut(rest, " ")
	v, err := strconv.Atoi(n)
	if !ok || err != nil {
		return settled, settled
	}
	const day = 24 * time.Hour
	// each unit's size, and how much more than v of them the words may mean
	units := map[string]struct{ size, width time.Duration }{
		"second": {time.Second, time.Second}, "minute": {time.Minute, time.Minute}, "hour": {time.Hour, 30 * time.Minute},
		"day": {day, day + 30*time.Minute}, "week": {7 * day, 7*day + 30*time.Minute},
		"month": {30 * day, 30*day + 30*time.Minute}, "year": {365 * day, 365*day + 30*time.Minute}}
	u, known := units[strings.TrimSuffix(unit, "s")]
	if !known {
		return settled, settled
	}
	return time.Duration(v) * u.size, time.Duration(v)*u.size + u.width
}

// restartSlack is what the engine's clock and the agent's may differ by, and what listing takes.
const restartSlack = 2 * time.Second

// restarts are the running containers of cs that restarted since the listing the record kept
// (before, taken at beforeAt; zero when none was): a container running then, with the same ID,
// whose run is younger now than the time since, by the engine's own words for it at their
// longest (upFor). A restart policy brings a crash back with its ID, so a service that
// crashes between two heartbeats is seen running at both: this is how it is told. Keyed by ID,
// with the words that name it.
func restarts(cs []effects.Container, before []store.Container, beforeAt, now time.Time) map[string]string {
	if beforeAt.IsZero() {
		return nil
	}
	since := now.Sub(beforeAt)
	running := map[string]bool{}
	for _, c := range before {
		if c.ID != "" && c.State == "running" {
			running[c.ID] = true
		}
	}
	var out map[string]string
	for _, c := range cs {
		if _, most := upFor(c.Status); c.State != "running" || !running[c.ID] || most >= since-restartSlack {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		status, _, _ := strings.Cut(c.Status, " (")
		out[c.ID] = fmt.Sprintf("%s (restarted since it was seen running %s ago: %s)", serviceOf(c), since.Round(time.Second), status)
	}
	return out
}

// services are the applied release's services as its checked model names them (nil: the
// release was staged before they were kept, or its list does not read).
func (tk *tick) services() []model.Service {
	rel, err := filepath.EvalSymlinks(tk.currentDir())
	if err != nil {
		return nil
	}
	b, err := files.ReadTrusted(model.ServicesPath(rel), 1<<20)
	if err != nil {
		return nil
	}
	var out []model.Service
	if json.Unmarshal(b, &out) != nil {
		return nil
	}
	return out
}

// stepHealthy: Up → Healthy | Failed. Wait up to healthy_timeout_s for every service of the
// release's model to run (healthy where it has a healthcheck) and stay up, with no restart, for
// min_healthy_s, logging progress; then the applied sha is recorded and the report queued.
func (tk *tick) stepHealthy(ctx context.Context) error {
	started := tk.Now()
	if err := tk.gate(ctx, started); err != nil {
		var unwell *notServing
		if errors.As(err, &unwell) {
			return tk.failBecause(ctx, machine.Up, unwell.code, unwell.reason, unwell.detail, true)
		}
		return err
	}
	return tk.healthy(ctx, tk.gated, started)
}

// notServing is the gate's verdict on a release that did not come up: its code and words.
type notServing struct {
	code   vocab.Code
	reason vocab.Reason
	detail string
}

func (e *notServing) Error() string { return string(e.code) + ": " + e.detail }

// gate waits up to healthy_timeout_s from started for the release to serve, as judge says,
// for min_healthy_s. The containers it passed on are left in tk.gated. A release that does not
// is a *notServing; a temporary error or a stop is returned as it is.
func (tk *tick) gate(ctx context.Context, started time.Time) error {
	deadline := started.Add(time.Duration(tk.Cfg.HealthyTimeoutS) * time.Second)
	minUp := time.Duration(tk.Cfg.MinHealthyS) * time.Second
	services := tk.services()
	lastLog := started
	for {
		cs, err := tk.Fx.Compose.PS(ctx, tk.currentDir())
		if err != nil && effects.IsTemporary(err) {
			return err
		}
		if effects.CodeOf(err) == vocab.ReleaseChanged {
			return &notServing{vocab.ReleaseChanged, "", sanitize.Line(err.Error())}
		}
		j := judge(cs, services, minUp, nil)
		if err == nil && j.ok() && j.settling <= 0 && (len(cs) > 0 || len(services) > 0) {
			tk.gated, tk.gatedWords = cs, j.words()
			return nil
		}
		if err == nil && len(j.final) > 0 {
			// an exit the engine never restarts (restart "no") is the release's answer: waiting
			// out healthy_timeout_s would not change it
			return &notServing{vocab.Unhealthy, vocab.ReasonExited, fmt.Sprintf("not healthy: %s, which nothing restarts (restart \"no\")", strings.Join(j.final, ", "))}
		}
		now := tk.Now()
		settling := err == nil && j.ok() && j.settling > 0
		wait := tk.HealthPoll
		if settling {
			wait = j.settling // running: the rest of min_healthy_s, then look again
		}
		if !now.Before(deadline) || settling && now.Add(j.settling).After(deadline) {
			why := strings.Join(j.bad, ", ")
			switch {
			case err != nil:
				why = "compose ps: " + err.Error()
			case len(cs) == 0:
				why = "no containers running"
			case settling:
				why = fmt.Sprintf("%s did not stay up min_healthy_s (%d s) within it (a restart starts its time again): %s",
					strings.Join(j.young, ", "), tk.Cfg.MinHealthyS, j.words())
			}
			return &notServing{vocab.Unhealthy, "", fmt.Sprintf("not healthy after %ds: %s", tk.Cfg.HealthyTimeoutS, why)}
		}
		if now.Sub(lastLog) >= 10*time.Second {
			lastLog = now
			tk.Log.Debug().Msgf("waiting for healthy: %s (%s); %ds left", j.words(), strings.Join(j.bad, ", "), int(deadline.Sub(now).Seconds()))
		}
		if tk.stopping() {
			return errStopped{}
		}
		if err := tk.Sleep(ctx, min(wait, max(deadline.Sub(now), time.Millisecond))); err != nil {
			return &effects.Error{Op: "health wait", Kind: effects.Temporary, Err: err}
		}
	}
}

// healthy records the apply: applied sha, history, counters cleared, report queued.
func (tk *tick) healthy(ctx context.Context, cs []effects.Container, started time.Time) error {
	rec := tk.eng.Record()
	now := tk.Now()
	rep := effects.Report{Sha: rec.Sha, Result: effects.ResultApplied, Containers: cs}
	detail := fmt.Sprintf("applied %s: %s", machine.ShortSha(rec.Sha), tk.gatedWords)
	if err := tk.eng.Fire(machine.Outcome{Event: machine.EvHealthy, Detail: detail, Update: func(r *store.Record, tx store.Tx) error {
		r.AppliedSha = r.Sha
		r.Attempts, r.NextRetryAt, r.Parked, r.Failure, r.Refusal = nil, timeZero, false, nil, nil
		r.Containers, r.SeenAt = toStore(cs), now
		if err := tx.AddApplied(store.Applied{Sha: r.Sha, At: now}); err != nil {
			return err
		}
		return tk.enqueue(r, tx, machine.Healthy, rep)
	}}, started); err != nil {
		return err
	}
	tk.dropKeptBundle(rec.Sha)
	tk.Log.Debug().Msg("applied " + machine.ShortSha(rec.Sha)) // the transition to Healthy says it
	return tk.flushOutbox(ctx)
}
