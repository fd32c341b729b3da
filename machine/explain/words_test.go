package explain_test

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/internal/vocab"
	"github.com/tikali/monky-deployd/machine"
	"github.com/tikali/monky-deployd/machine/explain"
	"github.com/tikali/monky-deployd/store"
)

// boxPaths are a box whose paths are none of the defaults.
var boxPaths = explain.Paths{StateDir: "/srv/box/state", DeployDir: "/srv/box/deploy/env-a", Config: "/srv/box/etc/config.yaml",
	BootstrapPath: "/srv/box/etc/grant.jwt", BaoCAFile: "/srv/box/etc/ca.pem", BaoAddr: "https://bao.box:8200"}

// TestFixNamesTheBoxsPaths: for every code of the vocabulary, the fix names only this box's
// configured paths (never a default it does not use, never a placeholder when the config is
// known) and starts with a command or the step that addresses the fault; the codes whose words
// were wrong say the right thing.
func TestFixNamesTheBoxsPaths(t *testing.T) {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	exit := vocab.ExitFail
	starts := []string{"ls ", "sudo ", "cd ", "docker ", "bao ", "systemctl ", "openssl ", "curl ", "grep ", "df ", "monky-deployd ",
		"resolvectl ", "command ", "find ", "getent ", "df ", vocab.NoCommand}
	want := map[vocab.Code][]string{
		"LOCAL_FAILURE":       {"ls -la /srv/box/state /srv/box/deploy/env-a", "bootstrap.jwt"},
		"COMPOSE_PULL_FAILED": {"/srv/box/state/docker/config.json"},
		"COMPOSE_UP_FAILED":   {"sudo -u monky-deployd docker compose -p monky-env-a logs"},
		"AGENT_ENV_MISMATCH":  {"/srv/box/etc/config.yaml"},
		"TLS_UNKNOWN_CA":      {"/srv/box/etc/ca.pem"},
		"CREDENTIAL_SHAPE":    {"/srv/box/state/bao.token"},
		"STAGE_FAILED":        {"/srv/box/deploy/env-a", "/srv/box/state/docker"},
		vocab.TicksStopped:    {"systemctl status monky-deployd.timer"},
	}
	never := map[vocab.Code][]string{
		"BUNDLE_SHA_MISMATCH": {"releases/"},
		"ENV_INCOMPLETE":      {"console"},
	}
	for _, code := range vocab.Codes() {
		in := explain.Input{
			Rec: store.Record{EnvID: "env-a", State: string(machine.Failed), Tick: 2, Action: vocab.ActionApply,
				Failure: &store.Failure{Sha: strings.Repeat("b", 64), Code: code, Detail: string(code) + ": the step's words", State: string(machine.Staged), At: at}},
			Recent: []store.TickSummary{{Tick: 2, StartedAt: at, EndedAt: at, Exit: &exit}},
			Now:    at.Add(time.Minute), Limits: explain.Limits{Paths: boxPaths},
		}
		w := explain.Decide(in).Why
		if w == nil || w.Code != code {
			t.Errorf("%s: why %+v", code, w)
			continue
		}
		for _, bad := range []string{"/var/lib/monky-deployd", "/etc/monky-deployd/", "<state_dir>", "<deploy_dir>", "<config.yaml>", "<bootstrap_path>", "<bao.ca_file>",
			"{state_dir}", "{deploy_dir}", "{config}", "{bootstrap}", "{bao_ca}", "{project}", "{env}"} {
			if strings.Contains(w.Fix, bad) {
				t.Errorf("%s: fix names %q, not this box's paths: %s", code, bad, w.Fix)
			}
		}
		ok := false
		for _, s := range starts {
			ok = ok || strings.HasPrefix(w.Fix, s)
		}
		if !ok {
			t.Errorf("%s: fix does not start with a command or a step: %s", code, w.Fix)
		}
		for _, s := range want[code] {
			if !strings.Contains(w.Fix, s) {
				t.Errorf("%s: fix lacks %q: %s", code, s, w.Fix)
			}
		}
		for _, s := range never[code] {
			if strings.Contains(w.Fix, s) {
				t.Errorf("%s: fix says %q: %s", code, s, w.Fix)
			}
		}
	}
}

// TestUnreadableGrantIsNotARefusal: a block on a bootstrap grant the agent's user cannot read
// is said as that — no one refused a token — and its fix is the file's owner and mode.
func TestUnreadableGrantIsNotARefusal(t *testing.T) {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	exit := vocab.ExitFail
	in := explain.Input{
		Rec: store.Record{EnvID: "env-a", State: string(machine.Blocked), Tick: 2,
			Block: &store.Block{Code: vocab.AgentUnauthenticated, Reason: vocab.ReasonGrantUnreadable, At: at,
				Detail: "no token and the bootstrap grant at /srv/box/etc/grant.jwt is unreadable: open /srv/box/etc/grant.jwt: permission denied"}},
		Recent: []store.TickSummary{{Tick: 2, StartedAt: at, EndedAt: at, Exit: &exit}},
		Now:    at.Add(time.Minute), Limits: explain.Limits{Paths: boxPaths},
	}
	v := explain.Decide(in)
	w := v.Why
	if w == nil || strings.Contains(w.Fault, "refused") || strings.Contains(w.Fix, "install kit") ||
		!strings.Contains(w.Fix, "chown monky-deployd /srv/box/etc/grant.jwt") || !strings.Contains(w.Fix, "chmod 0600") {
		t.Errorf("why %+v", w)
	}
	if v.Verdict != explain.NeedsPerson {
		t.Errorf("verdict %s", v.Verdict)
	}
}

// TestUnhealthyNextSaysNotConverged: an unhealthy box's next reads like every other sick
// box's: `not converged: UNHEALTHY — …`.
func TestUnhealthyNextSaysNotConverged(t *testing.T) {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	exit := vocab.ExitFail
	in := explain.Input{
		Rec: store.Record{EnvID: "env-a", State: string(machine.Failed), Tick: 2, Action: vocab.ActionNone, AppliedSha: strings.Repeat("a", 64),
			Failure: &store.Failure{Sha: strings.Repeat("a", 64), Code: vocab.Unhealthy, Detail: "api (running/unhealthy)", State: "CheckedIn", At: at}},
		Recent: []store.TickSummary{{Tick: 2, StartedAt: at, EndedAt: at, Exit: &exit}},
		Now:    at.Add(time.Minute),
	}
	if next := explain.Decide(in).Next; !strings.HasPrefix(next, "not converged: UNHEALTHY — ") {
		t.Errorf("next %q", next)
	}
}

// TestPrivilegedRefusedNamesWhatItIs: a PRIVILEGED_REFUSED whose reason is unlisted-field (the
// policy refused only fields its allowlist does not name) says so, never "power over the host";
// one with power over the host, a mix, or one written before reasons were kept keeps the cause's
// words, whatever its detail says. Refused before the lease or failed after it alike.
func TestPrivilegedRefusedNamesWhatItIs(t *testing.T) {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	sha := strings.Repeat("c", 64)
	const tail = " (bundle.json agent.allow_privileged is not set)"
	const unlisted = vocab.ReasonUnlistedField
	for _, c := range []struct {
		name, state string
		reason      vocab.Reason
		detail      string
		want, not   []string
	}{
		{"unlisted fields", "Refused", unlisted, "PRIVILEGED_REFUSED: service api: userns_mode_x is not allowed; service api: tty is not allowed until PROTOCOL.md §2 lists it: found harmless (a terminal and stdin for the container's own process, and whether compose shows its logs)" + tail,
			[]string{"sets only fields the allowlist", "does not name", "until PROTOCOL.md §2 lists it"}, []string{"power over the host", "nothing of the field's harm"}},
		{"a network's ipam, kept off the list for what it does", "Refused", "", "PRIVILEGED_REFUSED: network front: ipam is not allowed: a subnet the bundle picks is routed by the host into the project's bridge, and one carved out of the host's LAN takes the host's traffic to its neighbours (the engine picks each subnet from the pools the host's owner configured)" + tail,
			[]string{"power over the host", "kept off the list for what it would do"}, []string{"does not name", "nothing of the field's harm"}},
		{"driver_opts of a volume, after the lease", "Failed", "", "PRIVILEGED_REFUSED: volume data: driver_opts is not allowed (type=overlay, o=lowerdir=/etc); jobs are not allowed (in the model compose would run; bundle.json agent.allow_privileged is not set)",
			[]string{"power over the host"}, []string{"does not name"}},
		{"unlisted top-level key", "Failed", unlisted, "PRIVILEGED_REFUSED: job migrate: jobs are not allowed (in the model compose would run; bundle.json agent.allow_privileged is not set)",
			[]string{"sets only fields the allowlist"}, []string{"power over the host"}},
		{"power over the host", "Refused", "", "PRIVILEGED_REFUSED: service api: privileged: true" + tail,
			[]string{"power over the host", "a field, option, driver or name no one has listed"}, nil},
		{"a mix", "Refused", "", "PRIVILEGED_REFUSED: service api: tty is not allowed; service api: cap_add SYS_ADMIN" + tail,
			[]string{"power over the host"}, []string{"does not name"}},
		{"written before reasons were kept", "Refused", "", "PRIVILEGED_REFUSED: service api: tty is not allowed" + tail,
			[]string{"power over the host"}, []string{"does not name"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := store.Record{EnvID: "env-a", State: c.state, Tick: 3, Action: vocab.ActionApply, Sha: sha, DesiredSha: sha, LastTickAt: at}
			if c.state == "Refused" {
				rec.Refusal = &store.Refusal{Sha: sha, Code: "PRIVILEGED_REFUSED", Reason: c.reason, Detail: c.detail, At: at}
			} else {
				rec.Failure = &store.Failure{Sha: sha, Code: "PRIVILEGED_REFUSED", Reason: c.reason, Detail: c.detail, State: "LoggedIn", At: at}
			}
			st := store.NewMemory()
			exit := 1
			if err := st.Update(func(tx store.Tx) error {
				if err := tx.PutTick(store.TickSummary{Tick: 3, StartedAt: at, EndedAt: at, Exit: &exit}); err != nil {
					return err
				}
				return tx.PutRecord(rec)
			}); err != nil {
				t.Fatal(err)
			}
			var r *effects.ReportWhy
			if err := st.View(func(tx store.Tx) error {
				var err error
				r, _, err = explain.WhyOf(tx, at.Add(time.Minute), explain.Limits{TickRunning: true})
				return err
			}); err != nil {
				t.Fatal(err)
			}
			if r == nil || r.Code != "PRIVILEGED_REFUSED" {
				t.Fatalf("why %+v, want PRIVILEGED_REFUSED", r)
			}
			for _, w := range c.want {
				if !strings.Contains(r.Fault, w) {
					t.Errorf("fault %q lacks %q", r.Fault, w)
				}
			}
			for _, n := range c.not {
				if strings.Contains(r.Fault, n) {
					t.Errorf("fault %q holds %q", r.Fault, n)
				}
			}
			// the flag is offered only with what it opens: the whole policy, not one finding
			for _, words := range []string{r.Fault, r.Next, r.Fix} {
				if strings.Contains(words, "allow_privileged: true") && !strings.Contains(words, vocab.PrivilegedOpens) {
					t.Errorf("%q offers agent.allow_privileged without what it opens", words)
				}
			}
		})
	}
}

// TestComposeMissingIsNotAMissingCLI: a DOCKER_NOT_FOUND whose typed reason is a missing
// compose v2 (the docker CLI is there) says so, in explain and in status's headline, and its
// fix installs compose v2 where Debian 12 gets it (Docker's apt repository, else the static
// plugin): a command that installs, not a probe. Without the reason, the CLI is not there.
func TestComposeMissingIsNotAMissingCLI(t *testing.T) {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	exit := vocab.ExitFail
	for _, refused := range []bool{true, false} {
		rec := store.Record{EnvID: "env-a", State: string(machine.Failed), Tick: 2, Action: vocab.ActionApply, Sha: strings.Repeat("b", 64),
			Failure: &store.Failure{Sha: strings.Repeat("b", 64), Code: vocab.DockerNotFound, Reason: vocab.ReasonComposeMissing,
				Detail: "docker has no compose v2 plugin: docker: 'compose' is not a docker command.", State: string(machine.BundleVerified), At: at}}
		if refused {
			rec.State, rec.Failure = string(machine.Refused), nil
			rec.Refusal = &store.Refusal{Sha: rec.Sha, Code: vocab.DockerNotFound, Reason: vocab.ReasonComposeMissing, Detail: "docker has no compose v2 plugin", At: at}
		}
		in := explain.Input{Rec: rec, Recent: []store.TickSummary{{Tick: 2, StartedAt: at, EndedAt: at, Exit: &exit}}, Now: at.Add(time.Minute), Limits: explain.Limits{Paths: boxPaths}}
		w := explain.Decide(in).Why
		if w == nil || w.Code != vocab.DockerNotFound {
			t.Fatalf("refused %v: why %+v", refused, w)
		}
		if strings.Contains(w.Fault, "is not there") || !strings.Contains(w.Fault, "docker CLI (docker_bin) is there but compose v2 is not") {
			t.Errorf("refused %v: the CLI is there: %s", refused, w.Fault)
		}
		for _, s := range []string{"apt-get install -y docker-compose-plugin", "/usr/libexec/docker/cli-plugins/docker-compose", "Docker's apt repository"} {
			if !strings.Contains(w.Fix, s) {
				t.Errorf("refused %v: fix lacks %q: %s", refused, s, w.Fix)
			}
		}
		if strings.Contains(w.Fix, "command -v") || strings.Contains(w.Fix, "docker compose version") {
			t.Errorf("refused %v: a probe, not an install: %s", refused, w.Fix)
		}
		var b strings.Builder
		explain.WriteStatusText(&b, explain.Status{EnvID: "env-a", State: rec.State, Why: w, Verdict: explain.NeedsPerson, Codes: []string{string(w.Code)}})
		if head := strings.SplitN(b.String(), "\n", 2)[0]; !strings.Contains(head, "is there but compose v2 is not") {
			t.Errorf("refused %v: status's headline: %s", refused, head)
		}
		in.Rec = rec
		if in.Rec.Refusal != nil {
			in.Rec.Refusal.Reason = ""
		} else {
			in.Rec.Failure.Reason = ""
		}
		if w := explain.Decide(in).Why; !strings.Contains(w.Fault, "docker CLI (docker_bin) is not there") {
			t.Errorf("refused %v, no reason: %s", refused, w.Fault)
		}
	}
}

// TestDocsOfferAllowPrivilegedOnlyWithWhatItOpens: the operator's docs agree with the policy
// (docs/SECURITY.md): a line that names agent.allow_privileged as a way out of a refusal says
// that it turns the policy off for the whole bundle; only a quoted log line ("… is not set")
// names it without.
func TestDocsOfferAllowPrivilegedOnlyWithWhatItOpens(t *testing.T) {
	for _, doc := range []string{"../../docs/OPERATIONS.md", "../../README.md"} {
		raw, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(raw), "\n") {
			if strings.Contains(line, "allow_privileged") && !strings.Contains(line, "allow_privileged is not set") &&
				!strings.Contains(line, "turns the policy off for the whole bundle") {
				t.Errorf("%s:%d offers agent.allow_privileged without what it opens: %s", doc, i+1, line)
			}
		}
	}
}
