package explain_test

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tikali/monky-deployd/internal/model"
	"github.com/tikali/monky-deployd/internal/shline"
	"github.com/tikali/monky-deployd/internal/testkit"
	"github.com/tikali/monky-deployd/internal/vocab"
	"github.com/tikali/monky-deployd/machine"
	"github.com/tikali/monky-deployd/machine/explain"
	"github.com/tikali/monky-deployd/store"
)

var runsAsPrinted = testkit.RunsAsPrinted

// boxes are the three ways a record reaches explain: on the box with its config, a copy whose
// record says what decided its newest tick (with a path that needs quoting), and a copy an
// older agent wrote (no box facts: the config's defaults).
func boxes() map[string]struct {
	box store.Box
	lim explain.Limits
} {
	return map[string]struct {
		box store.Box
		lim explain.Limits
	}{
		"config": {lim: explain.Limits{Paths: boxPaths}},
		"record": {box: store.Box{Host: "qa-02.example", StateDir: "/srv/my box/state", DeployDir: "/srv/it's/deploy", Config: "/etc/m d/config.yaml",
			BootstrapPath: "/etc/m d/bootstrap.jwt", BaoCAFile: "/etc/m d/ca.pem", BaoAddr: "https://bao.qa:8200", Project: "shop_1", StuckAfterS: 600, StaleAfterS: 120,
			DiskFactor: 1.5, DiskHeadroomBytes: 2 << 30}},
		"sdk": {box: store.Box{Host: "qa-03.example", StateDir: "/var/lib/monky-deployd", Config: "/etc/m d/config.yaml",
			Transport: "sdk", Identity: "/var/lib/monky-deployd/id entity.json", User: "monky-deployd"}},
		"old copy": {},
	}
}

// recordOf puts code on a record the way the machine does: a refusal, a block, or a failure.
func recordOf(code vocab.Code, box store.Box, at time.Time) store.Record {
	rec := store.Record{EnvID: "env-a", Tick: 2, Action: vocab.ActionApply, Sha: strings.Repeat("b", 64), KVMount: "monky", Box: box,
		Token: store.TokenMeta{Present: true, EnvID: "env-b"}}
	c, _ := vocab.CauseOf(code)
	switch {
	case code == vocab.AgentUnauthenticated || code == vocab.AgentEnvMismatch:
		rec.State = string(machine.Blocked)
		rec.Block = &store.Block{Code: code, Detail: "bearer refused by tenancy (401)", At: at}
	case c.Kind == vocab.KindRefusal:
		rec.State = string(machine.Refused)
		rec.Refusal = &store.Refusal{Sha: rec.Sha, Code: code, Detail: "the step's words", At: at, NeedBytes: 3 << 30}
	default:
		rec.State = string(machine.Failed)
		rec.Failure = &store.Failure{Sha: rec.Sha, Code: code, Detail: string(code) + ": the step's words", State: string(machine.Staged), At: at}
		if box != (store.Box{}) {
			rec.Failure.Subject = secretPath // a copy an older agent wrote names none
		}
	}
	return rec
}

// secretPath is the secret a failure names, as a manifest entry gives it: a quote and a space
// in it, so that its fix line must quote it.
const secretPath = "monky/data/env-a/see/it's db"

// A secret OpenBao has no data, version or key for is named in its fix line (the record's
// subject, in the KV mount's terms, shell-quoted), by a command that prints no secret's value; a
// record that names none (an older agent's) keeps the registry's line, which lists the env's
// secrets.
func TestASecretFaultsFixNamesTheSecret(t *testing.T) {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	box := store.Box{StateDir: "/var/lib/monky-deployd", User: "monky-deployd"}
	for _, code := range []vocab.Code{vocab.KVNotFound, vocab.KVVersionDeleted, vocab.KVKeyMissing, vocab.SecretReadFailed} {
		rec := recordOf(code, box, at)
		exit := vocab.ExitFail
		in := explain.Input{Rec: rec, Recent: []store.TickSummary{{Tick: 2, StartedAt: at, EndedAt: at, Exit: &exit}}, Now: at.Add(time.Minute)}
		fix := explain.Decide(in).Why.Fix
		want := `bao kv metadata get -mount=monky 'env-a/see/it'\''s db'`
		if !strings.HasPrefix(fix, want) {
			t.Errorf("%s: fix %q, want it to start %q", code, fix, want)
		}
		if strings.Contains(fix, "kv get") {
			t.Errorf("%s: the fix prints the secret's value: %s", code, fix)
		}
		runsAsPrinted(t, string(code)+" fix", fix, true)
		in.Rec.Failure.Subject = ""
		if old := explain.Decide(in).Why.Fix; !strings.HasPrefix(old, "bao kv list -mount=monky env-a/see") {
			t.Errorf("%s without a subject: %q, want the registry's list of the env's secrets", code, old)
		}
	}
}

// withReasons are the typed causes whose words and fix differ from their code's own.
var withReasons = []struct {
	code   vocab.Code
	reason vocab.Reason
}{
	{vocab.ComposePullFailed, vocab.ReasonImageMissing}, {vocab.ComposePullFailed, vocab.ReasonRegistryDNS},
	{vocab.ComposePullFailed, vocab.ReasonRegistryDenied}, {vocab.DockerNotFound, vocab.ReasonComposeMissing},
	{vocab.AgentUnauthenticated, vocab.ReasonGrantUnreadable}, {vocab.AgentUnauthenticated, vocab.ReasonShape},
	{vocab.PrivilegedRefused, vocab.ReasonUnlistedField}, {vocab.Unhealthy, vocab.ReasonExited},
	{vocab.CredentialShape, vocab.ReasonBaoAnswerShape}, {vocab.CredentialShape, vocab.ReasonLeaseShape},
}

// trustReasons are what the agent's trust check finds at one of its own files: a tick-end
// LOCAL_FAILURE names the file (its subject) and the reason.
var trustReasons = []vocab.Reason{vocab.ReasonTrustLink, vocab.ReasonTrustType, vocab.ReasonTrustTree, vocab.ReasonTrustOwner, vocab.ReasonTrustMode}

// localFailure is a record whose newest tick ended LOCAL_FAILURE at the trust check of subject.
func localFailure(box store.Box, reason vocab.Reason, subject string, at time.Time) explain.Input {
	exit := vocab.ExitFail
	return explain.Input{Rec: store.Record{EnvID: "env-a", State: string(machine.Reported), Tick: 2, Box: box},
		Recent: []store.TickSummary{{Tick: 2, StartedAt: at, EndedAt: at, Exit: &exit}},
		Entries: map[uint64][]store.Entry{2: {{Tick: 2, At: at, From: "Idle", To: "Idle", Event: machine.NoteTickEnd, Code: vocab.LocalFailure,
			Reason: reason, Subject: subject, Detail: subject + ": not trusted"}}},
		Now: at.Add(time.Minute)}
}

// everyFix is explain's verdict for every code of the registry, and for every typed cause of
// withReasons (as a failure, and as a refusal where the code is one), on box b.
func everyFix(b struct {
	box store.Box
	lim explain.Limits
}, at time.Time) map[string]explain.Verdict {
	exit := vocab.ExitFail
	decide := func(rec store.Record) explain.Verdict {
		return explain.Decide(explain.Input{Rec: rec, Recent: []store.TickSummary{{Tick: 2, StartedAt: at, EndedAt: at, Exit: &exit}},
			Now: at.Add(time.Minute), Limits: b.lim})
	}
	out := map[string]explain.Verdict{}
	for _, code := range vocab.Codes() {
		out[string(code)] = decide(recordOf(code, b.box, at))
	}
	for _, r := range withReasons {
		rec := recordOf(r.code, b.box, at)
		switch {
		case rec.Block != nil:
			rec.Block.Reason = r.reason
		case rec.Refusal != nil:
			rec.Refusal.Reason = r.reason
		default:
			rec.Failure.Reason = r.reason
		}
		out[string(r.code)+"/"+string(r.reason)] = decide(rec)
		if r.code == vocab.DockerNotFound {
			// a box refusal too: checked again at every tick
			rec.State, rec.Failure = string(machine.Refused), nil
			rec.Refusal = &store.Refusal{Sha: rec.Sha, Code: r.code, Reason: r.reason, Detail: "the step's words", At: at}
			out[string(r.code)+"/"+string(r.reason)+" refused"] = decide(rec)
		}
	}
	stateDir := b.lim.Paths.StateDir + b.box.StateDir
	if stateDir == "" {
		stateDir = "/var/lib/monky-deployd"
	}
	for _, r := range trustReasons {
		in := localFailure(b.box, r, stateDir+"/bao.token", at)
		in.Limits = b.lim
		out[string(vocab.LocalFailure)+"/"+string(r)] = explain.Decide(in)
	}
	return out
}

// TestEveryFixRunsAsPrinted renders explain's why for every code of the registry (and every
// typed cause with words of its own), on the box, on a copy that records its box and on an
// older copy: no fix or next line holds a placeholder or needs jq, every fix line is a command
// bash accepts (never only a comment, no command inside its comment) or says it has none,
// every command a next line quotes is one bash accepts, and a command that changes the box runs
// as the agent's user.
func TestEveryFixRunsAsPrinted(t *testing.T) {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for name, b := range boxes() {
		for code, v := range everyFix(b, at) {
			if v.Why == nil {
				t.Errorf("%s %s: no why", name, code)
				continue
			}
			what := name + " " + code
			runsAsPrinted(t, what+" fix", v.Why.Fix, true)
			runsAsPrinted(t, what+" why.next", v.Why.Next, false)
			runsAsPrinted(t, what+" next", v.Next, false)
			if name == "record" && strings.Contains(v.Why.Fix, "/srv/my box") && !strings.Contains(v.Why.Fix, "'/srv/my box/state") {
				t.Errorf("%s: the path is not quoted: %s", what, v.Why.Fix)
			}
			for _, line := range []string{v.Why.Fix, v.Why.Next, v.Next} {
				carriesConfig(t, what, line, name)
			}
		}
	}
}

// TestFixInTheAgentsDirsRunsAsItsUser: state_dir and deploy_dir are 0700, the agent's user's:
// every command of a fix line that names them runs under sudo, and one that changes what is in
// them (rm, mv, chmod, touch, mkdir, cp, tee) runs as the agent's user, but for the removal of a
// tree, which may hold another user's files.
func TestFixInTheAgentsDirsRunsAsItsUser(t *testing.T) {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	dirs := map[string][]string{"config": {"/srv/box/state", "/srv/box/deploy/env-a"}, "record": {"'/srv/my box/state'", `'/srv/it'\''s/deploy'`}}
	changes := regexp.MustCompile(`^(rm|mv|chmod|touch|mkdir|cp|tee)\b`)
	for name, b := range boxes() {
		if dirs[name] == nil {
			continue
		}
		named := 0
		for code, v := range everyFix(b, at) {
			if v.Why == nil || strings.HasPrefix(v.Why.Fix, vocab.NoCommand) {
				continue
			}
			cmd, _ := shline.Split(v.Why.Fix)
			for _, seg := range shline.Commands(cmd) {
				c := shline.Start(seg.Text)
				inDir := false
				for _, d := range dirs[name] {
					inDir = inDir || strings.Contains(c, d)
				}
				if !inDir {
					continue
				}
				named++
				asAgent := strings.TrimPrefix(c, "sudo -u monky-deployd ")
				switch {
				case !strings.HasPrefix(c, "sudo "):
					t.Errorf("%s %s: %q names the agent's 0700 directories without sudo: %s", name, code, c, v.Why.Fix)
				case strings.HasPrefix(c, "sudo rm -r -- "):
					// a tree where the agent keeps a file may hold another user's files: root
					// removes it (files.TrustFix)
				case changes.MatchString(strings.TrimPrefix(c, "sudo ")) || (asAgent == c && changes.MatchString(asAgent)):
					t.Errorf("%s %s: %q changes the agent's directories as root, not as its user: %s", name, code, c, v.Why.Fix)
				}
			}
		}
		if named < 5 {
			t.Errorf("%s: only %d commands name the agent's directories: the test sees nothing", name, named)
		}
	}
}

// agentRun finds the agent's own commands in a line: the binary, then (after its flags) the
// subcommand.
var agentRun = regexp.MustCompile(`(^|[^-\w/.])monky-deployd ((?:--config (?:'[^']*'|\S+) )?)(run|resume|status|explain|bootstrap|check|purge|hold)\b`)

// carriesConfig: on a box whose config is not the packaged default, every agent command a line
// prints carries that config; on the default (an old copy) none does.
func carriesConfig(t *testing.T, what, line, box string) {
	t.Helper()
	want := map[string]string{"config": "--config /srv/box/etc/config.yaml ", "record": "--config '/etc/m d/config.yaml' ", "sdk": "--config '/etc/m d/config.yaml' ", "old copy": ""}[box]
	for _, m := range agentRun.FindAllStringSubmatch(line, -1) {
		if m[2] != want {
			t.Errorf("%s: %q carries %q, want %q: %s", what, m[3], m[2], want, line)
		}
	}
}

// TestFixNamesTheRecordsPaths: a copy read without its config names the paths its record
// says decided its newest tick, and the record's stuck_after_s decides its verdict.
func TestFixNamesTheRecordsPaths(t *testing.T) {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	exit := vocab.ExitFail
	box := boxes()["record"].box
	in := explain.Input{Rec: recordOf(vocab.LocalFailure, box, at), Recent: []store.TickSummary{{Tick: 2, StartedAt: at, EndedAt: at, Exit: &exit}}, Now: at.Add(time.Minute)}
	if fix := explain.Decide(in).Why.Fix; !strings.HasPrefix(fix, `sudo ls -la '/srv/my box/state' '/srv/it'\''s/deploy'`) {
		t.Errorf("fix %s", fix)
	}
	// a temporary fault 15 minutes old: past this box's stuck_after_s (600), not the default's
	tmp := exit
	tmp = vocab.ExitTemporary
	rec := store.Record{EnvID: "env-a", State: string(machine.Staged), Tick: 3, Box: box}
	in = explain.Input{Rec: rec, Recent: []store.TickSummary{{Tick: 3, StartedAt: at, EndedAt: at, Exit: &tmp}},
		Entries: map[uint64][]store.Entry{3: {{Tick: 3, At: at, From: "Staged", To: "Staged", Event: machine.NoteTickEnd, Code: vocab.BaoUnavailable, Detail: "OpenBao answered 503"}}},
		Now:     at.Add(15 * time.Minute)}
	if v := explain.Decide(in); v.Verdict != explain.NeedsPerson {
		t.Errorf("15 minutes past a stuck_after_s of 600: verdict %s (%+v)", v.Verdict, v.Why)
	}
	in.Rec.Box = store.Box{}
	if v := explain.Decide(in); v.Verdict != explain.Working {
		t.Errorf("an older copy, 15 minutes under the default stuck_after_s: verdict %s", v.Verdict)
	}
}

// TestOldRecordStillReads: a record an older agent wrote (no box) reads, with no box facts.
func TestOldRecordStillReads(t *testing.T) {
	var rec store.Record
	if err := json.Unmarshal([]byte(`{"env_id":"env-a","state":"Failed","tick":4,"token":{"present":true}}`), &rec); err != nil {
		t.Fatal(err)
	}
	if rec.Box != (store.Box{}) || rec.EnvID != "env-a" {
		t.Errorf("record %+v", rec)
	}
	b, err := json.Marshal(store.Record{EnvID: "env-a"})
	if err != nil || strings.Contains(string(b), `"box"`) {
		t.Errorf("a record with no box facts writes %s (%v)", b, err)
	}
}

// TestFixTheRecordContradicts: advice the record contradicts is never printed.
func TestFixTheRecordContradicts(t *testing.T) {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	exit := vocab.ExitFail
	decide := func(rec store.Record) explain.Verdict {
		return explain.Decide(explain.Input{Rec: rec, Recent: []store.TickSummary{{Tick: 2, StartedAt: at, EndedAt: at, Exit: &exit}}, Now: at.Add(time.Minute)})
	}
	box := boxes()["record"].box

	t.Run("no bootstrap --force without a grant on disk", func(t *testing.T) {
		for _, code := range []vocab.Code{vocab.AgentUnauthenticated, vocab.TokenExpired} {
			rec := recordOf(code, box, at)
			v := decide(rec)
			for _, line := range []string{v.Next, v.Why.Next, v.Why.Fix} {
				if strings.Contains(line, "--force") {
					t.Errorf("%s: no grant on disk, yet: %s", code, line)
				}
			}
			rec.Box.GrantOnDisk = true
			if v := decide(rec); code == vocab.AgentUnauthenticated && !strings.Contains(v.Next, "sudo -u monky-deployd monky-deployd --config '/etc/m d/config.yaml' bootstrap --force") {
				t.Errorf("%s: a grant on disk, and no bootstrap --force: %s", code, v.Next)
			}
		}
	})
	t.Run("no fix env_id when the token's env is the config's", func(t *testing.T) {
		rec := recordOf(vocab.AgentEnvMismatch, box, at)
		if fix := decide(rec).Why.Fix; !strings.Contains(fix, "fix env_id") || !strings.Contains(fix, "env-b") {
			t.Errorf("the token pinned to env-b, config env-a: %s", fix)
		}
		rec.Token.EnvID = rec.EnvID
		if fix := decide(rec).Why.Fix; strings.Contains(fix, "env_id") || strings.Contains(fix, "re-issue") {
			t.Errorf("the token's env is the config's, yet: %s", fix)
		}
	})
	t.Run("the config key when only the config can clear it", func(t *testing.T) {
		rec := recordOf(vocab.DiskInsufficient, box, at)
		rec.Refusal.FreeBytes = 5 << 30 // the images (4.5 GiB) fit; the 2 GiB headroom does not
		if fix := decide(rec).Why.Fix; !strings.Contains(fix, "disk.headroom_bytes") || !strings.Contains(fix, "'/etc/m d/config.yaml'") {
			t.Errorf("only the headroom does not fit: %s", fix)
		}
		rec.Refusal.FreeBytes = 1 << 30 // the images themselves do not fit
		if fix := decide(rec).Why.Fix; strings.Contains(fix, "headroom") {
			t.Errorf("the images do not fit: %s", fix)
		}
	})
	t.Run("nothing is sent while Blocked", func(t *testing.T) {
		rec := recordOf(vocab.AgentUnauthenticated, box, at)
		in := explain.Input{Rec: rec, Recent: []store.TickSummary{{Tick: 2, StartedAt: at, EndedAt: at, Exit: &exit}}, Now: at.Add(time.Minute),
			Outbox: []store.QueuedReport{{ID: 1, Queued: at.Add(-time.Hour), Attempts: 1}}}
		v := explain.Decide(in)
		lines := []string{v.Next}
		for _, w := range v.Also {
			lines = append(lines, w.Next)
		}
		for _, l := range lines {
			if strings.Contains(l, "next tick") && strings.Contains(l, "outbox") {
				t.Errorf("a blocked box's outbox is said to be sent: %s", l)
			}
		}
	})
}

// TestFixSaysAPrivateTmpDirIsUnseen: a box whose state_dir lies under /tmp (check config warns
// of it) runs, under the packaged unit, on a /tmp no shell sees: a fix naming it says so.
func TestFixSaysAPrivateTmpDirIsUnseen(t *testing.T) {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	exit := vocab.ExitFail
	box := store.Box{Host: "qa-02.example", StateDir: "/tmp/monky/state", DeployDir: "/srv/deploy", Config: "/etc/monky/config.yaml"}
	in := explain.Input{Rec: recordOf(vocab.LocalFailure, box, at), Recent: []store.TickSummary{{Tick: 2, StartedAt: at, EndedAt: at, Exit: &exit}}, Now: at.Add(time.Minute)}
	fix := explain.Decide(in).Why.Fix
	if !strings.Contains(fix, "state_dir /tmp/monky/state is under /tmp, which the packaged unit keeps private (PrivateTmp=yes)") || strings.Contains(fix, "deploy_dir /srv/deploy is under") {
		t.Errorf("fix %s", fix)
	}
	box.StateDir = "/var/lib/monky-deployd"
	in.Rec = recordOf(vocab.LocalFailure, box, at)
	if fix := explain.Decide(in).Why.Fix; strings.Contains(fix, "PrivateTmp") {
		t.Errorf("a state_dir outside /tmp: %s", fix)
	}
}

// TestFixRunsAsTheRecordsUser: a box whose ticks ran as another user than the packaged one (a
// laptop's, a hand install's) has every fix and next line name that user — sudo -u, the owner,
// the groups it must be in — never monky-deployd; a record that names no user (an older copy)
// names the packaged user.
func TestFixRunsAsTheRecordsUser(t *testing.T) {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	asUser := regexp.MustCompile(`(?:^|[\s;&(])(sudo -u|owner|id|chown|usermod -aG docker|usermod -a -G ziti) ('#\d+'|[a-z_][-a-z0-9_]*)`)
	for user, want := range map[string]string{"ops": "ops", "": "monky-deployd", "#1001": "'#1001'"} {
		b := boxes()["record"]
		b.box.User = user
		named := 0
		for code, v := range everyFix(b, at) {
			for _, line := range []string{v.Why.Fix, v.Why.Next, v.Next} {
				for _, m := range asUser.FindAllStringSubmatch(line, -1) {
					named++
					if m[2] != want {
						t.Errorf("user %q, %s: %q names %s, want %s: %s", user, code, m[0], m[2], want, line)
					}
				}
			}
			runsAsPrinted(t, "user "+user+" "+code+" fix", v.Why.Fix, true)
		}
		if named < 20 {
			t.Errorf("user %q: only %d lines name a user: the test sees nothing", user, named)
		}
	}
}

// TestAMeshFaultOnAnSDKBoxNamesNoTunneller: on a box that dials with the OpenZiti SDK no
// tunneller carries the dials, so no fix of the box sends a person to ziti-edge-tunnel; a mesh
// fault's fix asks the identity's controller (the identity's path quoted) instead.
func TestAMeshFaultOnAnSDKBoxNamesNoTunneller(t *testing.T) {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for code, v := range everyFix(boxes()["sdk"], at) {
		if v.Why != nil && strings.Contains(v.Why.Fix, "ziti-edge-tunnel") {
			t.Errorf("sdk box, %s: the fix names the tunneller: %s", code, v.Why.Fix)
		}
	}
	for _, code := range []vocab.Code{vocab.Unreachable, vocab.Timeout, vocab.ConnectionReset} {
		v := everyFix(boxes()["sdk"], at)[string(code)]
		if v.Why == nil || !strings.Contains(v.Why.Fix, `sudo -u monky-deployd grep -o 'https://[^"]*' '/var/lib/monky-deployd/id entity.json'`) {
			t.Errorf("sdk box, %s: the fix does not ask the identity's controller: %+v", code, v.Why)
		}
	}
	if v := everyFix(boxes()["record"], at)[string(vocab.Unreachable)]; v.Why == nil || !strings.Contains(v.Why.Fix, "ziti-edge-tunnel") {
		t.Errorf("a box of the system transport: the tunneller's fix is gone: %+v", v.Why)
	}
}

// A bundle tenancy does not have is the publisher's to publish: the words name the sha whole, as
// the publisher looks it up, and never a placeholder when the record holds none.
func TestABundleNotFoundNamesItsSha(t *testing.T) {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	rec := recordOf(vocab.BundleNotFound, store.Box{User: "monky-deployd"}, at)
	exit := vocab.ExitFail
	in := explain.Input{Rec: rec, Recent: []store.TickSummary{{Tick: 2, StartedAt: at, EndedAt: at, Exit: &exit}}, Now: at.Add(time.Minute)}
	if fix := explain.Decide(in).Why.Fix; !strings.Contains(fix, "publish the bundle of "+rec.Sha+",") {
		t.Errorf("fix %q does not name the sha %s", fix, rec.Sha)
	}
	in.Rec.Sha = ""
	if fix := explain.Decide(in).Why.Fix; !strings.Contains(fix, "publish the bundle of the desired sha,") || strings.Contains(fix, "{") {
		t.Errorf("fix %q on a record with no sha", fix)
	}
}

// TestARecordWithoutAReasonReadsByItsCode: every typed cause with words of its own, written by an
// agent that kept no reason (nor subject), reads with its code's own words and a fix line that
// runs as printed: never a cause read out of its recorded words, never a reason's fix for a
// cause the record does not name.
func TestARecordWithoutAReasonReadsByItsCode(t *testing.T) {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	exit := vocab.ExitFail
	b := boxes()["config"]
	for _, r := range withReasons {
		rec := recordOf(r.code, b.box, at)
		// the words a typed cause would have written, with no type behind them
		words := "a token that is not printable ASCII in OpenBao's login answer; manifest unknown; no such host"
		switch {
		case rec.Block != nil:
			rec.Block.Detail = words
		case rec.Refusal != nil:
			rec.Refusal.Detail = words
		default:
			rec.Failure.Detail, rec.Failure.Subject = words, ""
		}
		v := explain.Decide(explain.Input{Rec: rec, Recent: []store.TickSummary{{Tick: 2, StartedAt: at, EndedAt: at, Exit: &exit}},
			Now: at.Add(time.Minute), Limits: b.lim})
		if v.Why == nil {
			t.Fatalf("%s: no why", r.code)
		}
		if v.Why.Reason != "" {
			t.Errorf("%s: reason %q read into a record that names none", r.code, v.Why.Reason)
		}
		withReason := everyFix(b, at)[string(r.code)+"/"+string(r.reason)]
		if withReason.Why != nil && v.Why.Fix == withReason.Why.Fix && v.Why.Fault == withReason.Why.Fault {
			t.Errorf("%s without a reason reads as %s: %s", r.code, r.reason, v.Why.Fault)
		}
		runsAsPrinted(t, string(r.code)+" without a reason, fix", v.Why.Fix, true)
	}
	for _, r := range trustReasons {
		in := localFailure(store.Box{}, r, "", at)
		in.Limits = b.lim
		if w := explain.Decide(in).Why; w == nil || !strings.HasPrefix(w.Fix, "sudo ls -la /srv/box/state") {
			t.Errorf("%s with no subject: %+v", r, w)
		}
	}
}

// TestALookAtOpenBaoNamesTheBoxsAddress: a fix line that looks at OpenBao names the address the
// box dialled and the CA it trusts, and a look at its role the auth mount and role it logs in
// with, as the record (or the config) has them; a copy an older agent wrote, which names none,
// names the config's defaults.
func TestALookAtOpenBaoNamesTheBoxsAddress(t *testing.T) {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for name, want := range map[string]string{
		"config":   "curl -s --cacert /srv/box/etc/ca.pem https://bao.box:8200/v1/sys/health",
		"record":   "curl -s --cacert '/etc/m d/ca.pem' https://bao.qa:8200/v1/sys/health",
		"old copy": "curl -s --cacert /etc/monky-deployd/openbao-ca.pem https://bao.cbs.tikali.net:8200/v1/sys/health",
	} {
		fixes := everyFix(boxes()[name], at)
		for _, code := range []vocab.Code{vocab.BaoUnavailable, vocab.BaoAnswer} {
			if fix := fixes[string(code)].Why.Fix; !strings.HasPrefix(fix, want) {
				t.Errorf("%s %s: fix %q, want it to begin %q", name, code, fix, want)
			}
		}
	}
	b := boxes()["record"]
	b.box.BaoAuthMount, b.box.BaoRole = "jwt qa", "env-qa-02"
	for _, code := range []vocab.Code{vocab.LeaseEveryTick, vocab.BaoPermissionDenied} {
		if fix := everyFix(b, at)[string(code)].Why.Fix; !strings.Contains(fix, "bao read 'auth/jwt qa/role/env-qa-02'") {
			t.Errorf("%s: fix %q, want it to read the box's role", code, fix)
		}
	}
}

// TestAPullFaultsFixPullsAsTheAgentDid: an image the registry does not hold, or a registry whose
// name does not resolve, is named by the pull the agent ran, run again as printed: its user, its
// docker directory, the release's resolved model (model.ModelPath, where the agent wrote it) and
// directory, the project. Compose's own output names the image or the registry; the line no
// longer sends the person to the evidence for it.
func TestAPullFaultsFixPullsAsTheAgentDid(t *testing.T) {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	sha := strings.Repeat("b", 64)
	rel := boxPaths.DeployDir + "/releases/" + sha
	want := "sudo -u monky-deployd env DOCKER_CONFIG=/srv/box/state/docker docker compose -f " + model.ModelPath(rel) +
		" --env-file " + model.EmptyEnvPath(rel) + " --project-directory " + rel + " -p monky-env-a pull   # "
	for _, r := range []vocab.Reason{vocab.ReasonImageMissing, vocab.ReasonRegistryDNS} {
		fix := everyFix(boxes()["config"], at)[string(vocab.ComposePullFailed)+"/"+string(r)].Why.Fix
		if !strings.HasPrefix(fix, want) || strings.Contains(fix, "evidence") {
			t.Errorf("%s: fix %q, want it to begin %q and name no evidence", r, fix, want)
		}
	}
}
