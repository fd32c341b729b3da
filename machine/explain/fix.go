package explain

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/tikali/monky-deployd/effects/files"
	"github.com/tikali/monky-deployd/internal/config"
	"github.com/tikali/monky-deployd/internal/shline"
	"github.com/tikali/monky-deployd/internal/vocab"
	"github.com/tikali/monky-deployd/machine"
)

// The one place a fix or next line becomes what a person reads (AGENT.md, "Every word a person
// reads is a fact of the record"): its names are filled from the record (the paths and values
// that decided the newest tick, store.Box), shell-quoted; a command that changes the box runs
// as the agent's user; and advice the record contradicts is replaced before it is printed.

// agentUser is the user the packaged agent runs as: a command that changes the box runs as it
// when the record does not name the user its ticks ran as (a copy an older agent wrote).
const agentUser = "monky-deployd"

// asAgentPrefix runs a command as the agent's user, {user}: the record's (store.Box.User), else
// agentUser.
const asAgentPrefix = "sudo -u {user} "

// changesBox are the commands that change the box (the agent's own state or the project's
// containers): printed, they carry asAgentPrefix. Read-only ones (status, explain, ps, logs) do not
// need it.
var changesBox = []string{
	"monky-deployd run", "monky-deployd resume", "monky-deployd bootstrap",
	"docker compose -p {project} down", "docker compose -p {project} up", "docker image prune",
}

// words are this box's values for the names a fix or next line holds, shell-quoted: the
// config's paths when it was read, else the record's (what decided the newest tick), else the
// config's defaults (a copy an older agent wrote).
func (in Input) words() *strings.Replacer {
	p := in.Limits.Paths
	or := func(v, def string) string {
		if v == "" {
			return shellQuote(def)
		}
		return shellQuote(v)
	}
	env := in.Rec.EnvID
	envWord := shellQuote(env)
	if env == "" {
		// a file no tick has written: the box's config knows, and status prints it (no tool
		// beyond the agent and awk, which every Debian has)
		envWord = `"$(monky-deployd status | awk '$1 == "env" {print $2}')"`
	}
	project := in.Rec.Box.Project
	if project == "" {
		project = "monky-" + env
	}
	box := in.Rec.Box
	baoRole := "auth/" + orDefault(box.BaoAuthMount, config.DefaultBaoAuthMount) + "/role/" + orDefault(box.BaoRole, config.DefaultBaoRole)
	stateDir := orDefault(p.StateDir, config.DefaultStateDir)
	// deploy_dir's default is state_dir/env_id (config.yaml)
	deployDir := orDefault(p.DeployDir, strings.TrimSuffix(stateDir, "/")+"/"+env)
	return strings.NewReplacer(
		"{state_dir}", shellQuote(stateDir), "{deploy_dir}", shellQuote(deployDir),
		"{config}", or(p.Config, config.DefaultPath), "{bootstrap}", or(p.BootstrapPath, config.DefaultBootstrapPath),
		"{bao_ca}", or(p.BaoCAFile, config.DefaultBaoCAFile), "{bao_addr}", or(p.BaoAddr, config.DefaultBaoAddr),
		"{bao_role}", shellQuote(baoRole), "{kv_mount}", or(in.Rec.KVMount, config.DefaultBaoKVMount),
		"{project}", shellQuote(project), "{env}", envWord, "{user}", userWord(orDefault(in.Rec.Box.User, agentUser)),
		"{identity}", or(p.Identity, config.DefaultIdentityDir+"/monky-host."+env+".json"),
		"{sha}", shaWords(in.Rec.Sha))
}

// shaWords is the record's desired sha as a fix line names it, whole (a publisher looks it up),
// or "the desired sha" when the record holds none a person could use.
func shaWords(sha string) string {
	if len(sha) != 64 || strings.Trim(sha, "0123456789abcdef") != "" {
		return "the desired sha"
	}
	return sha
}

// userWord is user as sudo -u takes it: its name, or #uid (quoted) for a uid with no name.
func userWord(user string) string {
	if strings.HasPrefix(user, "#") {
		return "'" + user + "'"
	}
	return shellQuote(user)
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// render fills line's names with this box's words and prefixes every command in it that changes
// the box, or names state_dir or deploy_dir (0700, the agent's user's), with asAgentPrefix.
func (in Input) render(line string) string {
	for _, c := range changesBox {
		line = asAgent(line, c)
	}
	line = inAgentDirs(line)
	line = in.withConfig(line)
	return in.words().Replace(line)
}

// agentCommands are the agent's subcommands a fix or next line may print.
var agentCommands = []string{
	"run", "resume", "status", "explain", "bootstrap", "check", "purge", "diagram", "hold", "enroll",
}

// withConfig gives every agent command in line the box's own --config when the record says the
// box ran on a config other than the packaged default: typed as printed, a command without it
// reads the default config and another state file (AGENT.md, "A fix line is a command for this
// box").
func (in Input) withConfig(line string) string {
	cfg := in.Limits.Paths.Config
	if cfg == "" || cfg == config.DefaultPath || !strings.Contains(line, "monky-deployd ") {
		return line
	}
	const agent = "monky-deployd "
	var b strings.Builder
	for {
		i := strings.Index(line, agent)
		if i < 0 {
			b.WriteString(line)
			return b.String()
		}
		end := i + len(agent)
		b.WriteString(line[:end])
		rest := line[end:]
		whole := i == 0 || !isWordByte(line[i-1])
		if whole && !strings.HasPrefix(rest, "--config") && startsWithCommand(rest) {
			b.WriteString("--config {config} ")
		}
		line = rest
	}
}

// startsWithCommand: s begins with one of the agent's subcommands as a whole word.
func startsWithCommand(s string) bool {
	for _, c := range agentCommands {
		if strings.HasPrefix(s, c) && (len(s) == len(c) || !isWordByte(s[len(c)])) {
			return true
		}
	}
	return false
}

// agentDirs are the names of the directories only the agent's user may enter (0700).
var agentDirs = []string{"{state_dir}", "{deploy_dir}"}

// inAgentDirs puts asAgentPrefix before every simple command of line's code (not its comment)
// that names state_dir or deploy_dir and does not run under sudo already: typed as printed by
// another user, it could not enter them.
func inAgentDirs(line string) string {
	if strings.HasPrefix(line, vocab.NoCommand) {
		return line
	}
	code, comment := shline.Split(line)
	var b strings.Builder
	for _, seg := range shline.Commands(code) {
		b.WriteString(seg.Sep)
		rest := shline.Start(seg.Text)
		lead := seg.Text[:len(seg.Text)-len(rest)]
		named := false
		for _, d := range agentDirs {
			named = named || strings.Contains(rest, d)
		}
		if named && !strings.HasPrefix(rest, "sudo ") {
			rest = asAgentPrefix + rest
		}
		b.WriteString(lead + rest)
	}
	return b.String() + comment
}

// asAgent puts asAgentPrefix before every cmd in line that does not carry it yet.
func asAgent(line, cmd string) string {
	var b strings.Builder
	for {
		i := strings.Index(line, cmd)
		if i < 0 {
			b.WriteString(line)
			return b.String()
		}
		b.WriteString(line[:i])
		end := i + len(cmd)
		whole := (i == 0 || !isWordByte(line[i-1])) && (end == len(line) || !isWordByte(line[end]))
		if whole && !strings.HasSuffix(line[:i], asAgentPrefix) {
			b.WriteString(asAgentPrefix)
		}
		b.WriteString(cmd)
		line = line[i+len(cmd):]
	}
}

func isWordByte(c byte) bool {
	return c == '-' || c == '_' || c == '/' || c == '.' || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9')
}

// shellQuote is s as one shell word: as it is when it holds nothing the shell reads, else in
// single quotes.
func shellQuote(s string) string {
	if s == "" {
		return "''"
	}
	plain := true
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(isWordByte(c) || c == ':' || c == '@' || c == '%' || c == '+' || c == '=' || c == ',') {
			plain = false
			break
		}
	}
	if plain {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// finish makes every line of v true of this box's record and runnable as printed: the record's
// checks first (checked), then the names filled and the commands that change the box run as
// the agent's user (render).
func (in Input) finish(v *Verdict) {
	for _, w := range in.whysOf(v) {
		w.Who = whoActs(w.Code, w.Reason)
		in.checked(w)
		w.Fix = in.meshFix(w.Fix)
		w.Fix = in.privateTmpNote(w.Fix, in.render(w.Fix))
		w.Next = in.render(w.Next)
		w.short = in.render(w.short)
	}
	v.Next = in.render(in.checkedNext(v.Next))
}

func (in Input) whysOf(v *Verdict) []*Why {
	var out []*Why
	if v.Why != nil {
		out = append(out, v.Why)
	}
	for i := range v.Also {
		out = append(out, &v.Also[i])
	}
	return out
}

// blocked: the box is Blocked, so no tick makes a call until a person acts.
func (in Input) blocked() bool { return stateOf(in.Rec) == string(machine.Blocked) }

// grantOnDisk: the record says a bootstrap grant lay on disk at the newest tick (a file an older
// agent wrote does not say, and a block is only ever written with no fresh grant on disk).
func (in Input) grantOnDisk() bool { return in.Rec.Box.GrantOnDisk }

// checked replaces what w's fix or next would say that the record contradicts.
func (in Input) checked(w *Why) {
	rec := in.Rec
	switch w.Code {
	case vocab.AgentEnvMismatch:
		if tokenEnv := rec.Token.EnvID; tokenEnv != "" && tokenEnv == rec.EnvID {
			// the token is pinned to the config's env: neither env_id nor the identity is wrong
			w.Fix = "monky-deployd explain -n 5   # the token's env is config.yaml's ({env}): tenancy refused a call (403) for another reason; check the env's grant and tenancy's log; once it is fixed, the agent's resume lifts the block"
		} else if tokenEnv != "" {
			w.Fix = "grep -n '^env_id' {config}   # config says {env}, the token is pinned to " + shellQuote(tokenEnv) + ": fix env_id (a changed config unblocks), or re-issue the identity and grant for {env}"
		}
	case vocab.ReportPending, vocab.OutboxStuck:
		if in.blocked() {
			w.Next = sentence("nothing is sent while the box is blocked: no tick makes a call until the block is lifted, then the outbox is sent first")
			w.short = "the outbox waits for the block to be lifted"
		}
	case vocab.Unhealthy:
		if t := rec.Box.HealthyTimeoutS; t > 0 {
			// the value that decided it, as the box had it
			w.Fault = strings.Replace(w.Fault, "within healthy_timeout_s", fmt.Sprintf("within healthy_timeout_s (%d s)", t), 1)
		}
	case vocab.KVNotFound, vocab.KVVersionDeleted, vocab.KVKeyMissing, vocab.SecretReadFailed:
		if fix := in.secretFix(w.Code); fix != "" {
			w.Fix = fix
		}
	case vocab.LocalFailure:
		in.trustWords(w)
	case vocab.CredentialShape:
		if s, ok := answerShapes[w.Reason]; ok {
			w.Fault = strings.Replace(w.Fault, causeOf(vocab.CredentialShape).Fault, s.fault, 1)
			w.Fix = s.fix
		}
	case vocab.DiskInsufficient:
		if fix := in.diskFix(); fix != "" {
			w.Fix = fix
		}
		if rec.Refusal != nil && rec.Refusal.NeedBytes > implausibleNeed {
			w.Who = WhoPublisher // the bundle's declared size is wrong, not this disk
		}
	}
	if !in.grantOnDisk() {
		// no grant on disk (or none known): bootstrap --force has nothing to log in with
		w.Fix = noForce(w.Fix)
		w.Next = noForce(w.Next)
		w.short = noForce(w.short)
	}
}

// secretFix is a secret fault's fix naming the secret the failure read (store.Failure.Subject,
// the manifest entry's path, in the KV mount's terms), "" when the record does not name it (a
// record an older agent wrote, or a path outside the mount): the registry's line then lists the
// env's secrets and leaves the name to the evidence. Nothing it runs prints a secret's value.
func (in Input) secretFix(code vocab.Code) string {
	f := in.Rec.Failure
	if f == nil || f.Code != code || f.Subject == "" {
		return ""
	}
	mount := orDefault(in.Rec.KVMount, config.DefaultBaoKVMount)
	p, ok := strings.CutPrefix(f.Subject, mount+"/data/")
	if !ok || p == "" {
		return ""
	}
	look := "bao kv metadata get -mount={kv_mount} " + shellQuote(p)
	switch code {
	case vocab.KVNotFound:
		return look + "   # no such secret (or not at the pinned version): set it in OpenBao, or fix the entry's path in the manifest"
	case vocab.KVVersionDeleted:
		return look + "   # its versions: undelete the pinned one (bao kv undelete -versions=N), or publish the bundle with a live version"
	case vocab.SecretReadFailed:
		return look + "   # OpenBao refused or could not serve it to the box's token: the policy of the box's role must read it; a server error is OpenBao's own"
	default:
		return look + "   # the secret exists without the key the entry reads (the evidence lists the keys it has): add the key (bao kv patch), or fix the entry's key in the manifest"
	}
}

// trustWords words a LOCAL_FAILURE whose entry names the file or directory the trust check
// refused (store.Entry.Subject, with what it found as the reason): the fault names the file and
// what was found; the fix is the command that mends it (files.TrustFix, as the agent's own error
// printed it), then the tick again. An entry that names none (an older agent's, or a local
// failure that is not the trust check's) keeps the registry's words, whose line lists the
// agent's directories.
func (in Input) trustWords(w *Why) {
	if w.subject == "" {
		return
	}
	p := in.Limits.Paths
	stateDir := orDefault(p.StateDir, config.DefaultStateDir)
	deployDir := orDefault(p.DeployDir, filepath.Join(stateDir, in.Rec.EnvID))
	// the directories the agent's user owns: an entry of one is its user's to remove
	own := slices.Contains([]string{stateDir, filepath.Join(stateDir, "docker"), deployDir, filepath.Join(deployDir, "releases")}, filepath.Dir(w.subject))
	user := strings.TrimPrefix(orDefault(in.Rec.Box.User, agentUser), "#")
	mend := files.TrustFix(w.Reason, w.subject, user, own)
	if mend == "" {
		return
	}
	found := trustFound[w.Reason]
	w.Fault = strings.Replace(w.Fault, causeOf(vocab.LocalFailure).Fault, "the agent does not trust its own "+w.subject+", which "+found.what+": nothing was sent", 1)
	why := "   # " + found.mend + "; then the tick runs again"
	if filepath.Base(w.subject) == "bao.token" && found.removes && !in.grantOnDisk() {
		why += "; without the token the box logs in only with a fresh bootstrap.jwt: re-run the install kit first"
	}
	w.Fix = mend + " && monky-deployd run --once" + why
}

// answerShapes are the words of a CREDENTIAL_SHAPE by whose credential it was, when it came in
// an answer (the stored token's is a block: blockedWhy words it).
var answerShapes = map[vocab.Reason]struct{ fault, fix string }{
	vocab.ReasonBaoAnswerShape: {"the token in OpenBao's login answer is empty, too long or not printable ASCII, so it was not stored: what answers at bao.addr is not OpenBao's own listener (a proxy's page), or OpenBao is broken",
		"grep -A3 '^bao:' {config}   # addr must be OpenBao's own listener; then OpenBao's audit log for the box's login"},
	vocab.ReasonLeaseShape: {"the login_jwt in tenancy's lease is empty, too long or not printable ASCII, so it was not sent to OpenBao: tenancy answered a lease it should not have",
		vocab.NoCommand + "the lease is tenancy's, and nothing on this box mends it: tell tenancy's operators (their log for POST /v1/agent/lease); the box asks again at its next retry"},
}

// trustFound is what a trust check's reason found and what its fix does, in words, and whether
// the fix removes the file.
var trustFound = map[vocab.Reason]struct {
	what, mend string
	removes    bool
}{
	vocab.ReasonTrustLink:  {"is a symlink", "removes the link: the agent writes no file through one", true},
	vocab.ReasonTrustType:  {"is not the kind of file the agent keeps there (a FIFO, a device, a socket, or a file for a directory)", "removes it: the agent makes its own", true},
	vocab.ReasonTrustTree:  {"is a directory where the agent keeps a file", "removes the directory: the agent makes its own file", true},
	vocab.ReasonTrustOwner: {"is another user's", "gives it to the agent's user", false},
	vocab.ReasonTrustMode:  {"is group- or world-writable", "makes it the agent's user's alone", false},
}

// checkedNext is the machine's next line, less what the record contradicts.
func (in Input) checkedNext(next string) string {
	if !in.grantOnDisk() {
		next = noForce(next)
	}
	if in.blocked() {
		next = strings.ReplaceAll(next, " wait in the outbox for the next tick", " wait in the outbox until the block is lifted")
	}
	return next
}

// forceOffers are the ways a line offers `bootstrap --force`, and what it says instead when no
// grant is on disk.
var forceOffers = []struct{ offer, instead string }{
	{" or `monky-deployd bootstrap --force`", ""},
	{" (or `monky-deployd bootstrap --force`)", ""},
	{", or `monky-deployd bootstrap --force`", ""},
	{"; then: monky-deployd bootstrap --force", ": its bootstrap.jwt is used at the next tick"},
	{"; then: " + asAgentPrefix + "monky-deployd bootstrap --force", ": its bootstrap.jwt is used at the next tick"},
	{" && " + asAgentPrefix + "monky-deployd bootstrap --force", ""},
}

// noForce is line without its offer of `bootstrap --force` (no grant is on disk to force).
func noForce(line string) string {
	for _, f := range forceOffers {
		line = strings.ReplaceAll(line, f.offer, f.instead)
	}
	return line
}

// diskFix is the fix of a DISK_INSUFFICIENT that only the config can clear, "" otherwise: the
// images the bundle declares fit the free space, the headroom the config adds does not.
func (in Input) diskFix() string {
	r, b := in.Rec.Refusal, in.Rec.Box
	if r == nil || r.FreeBytes <= 0 || b.DiskFactor == 0 || r.NeedBytes > implausibleNeed {
		return ""
	}
	images := int64(float64(max(r.NeedBytes, 0)) * b.DiskFactor)
	if images > r.FreeBytes || images+b.DiskHeadroomBytes <= r.FreeBytes {
		return ""
	}
	return fmt.Sprintf("grep -n -A3 '^disk:' {config}   # disk.headroom_bytes (%d) is what does not fit: the images need %s of the %s free; lower it, or free %s",
		b.DiskHeadroomBytes, machine.Size(images), machine.Size(r.FreeBytes), machine.Size(images+b.DiskHeadroomBytes-r.FreeBytes))
}

// Who must act on a fault (Why.Who): the box's operator, the bundle's publisher, OpenBao's or
// tenancy's operators. A desk routes a box that needs a person by it.
const (
	WhoBox       = "box"
	WhoPublisher = "publisher"
	WhoOpenBao   = "openbao"
	WhoTenancy   = "tenancy"
)

// actors are the codes someone other than the box's operator must act on.
var actors = map[string][]vocab.Code{
	WhoPublisher: {vocab.BundleInvalid, vocab.BundleShaMismatch, vocab.BundleEnvMismatch, vocab.EnvIncomplete, vocab.ManifestPathRefused,
		vocab.PrivilegedRefused, vocab.RollbackRefused, vocab.BaoPath, vocab.BundleNotFound},
	WhoOpenBao: {vocab.BaoLoginRefused, vocab.SecretReadFailed, vocab.RegistryAuthInvalid, vocab.BaoPermissionDenied, vocab.BaoUnavailable,
		vocab.KVNotFound, vocab.KVVersionDeleted, vocab.KVKeyMissing, vocab.BaoNotFound, vocab.BaoAnswer, vocab.BaoRequestRefused,
		vocab.LeaseEveryTick, vocab.TokenExpiring},
	WhoTenancy: {vocab.LeaseShape, vocab.LeaseFailed, vocab.CheckinShape, vocab.BundleFetchFailed, vocab.ReportPending, vocab.OutboxStuck,
		vocab.LeaseBudget, vocab.LeaseRateLimited},
}

// whoActs is who must act on code for its typed cause: the box's operator unless another is
// named for it. An image the registry does not hold is the bundle's to fix, whatever the code.
func whoActs(code vocab.Code, reason vocab.Reason) string {
	switch reason {
	case vocab.ReasonImageMissing:
		return WhoPublisher
	case vocab.ReasonLeaseShape:
		return WhoTenancy
	}
	for who, codes := range actors {
		if slices.Contains(codes, code) {
			return who
		}
	}
	return WhoBox
}

// WhoRank orders who must act for a desk's triage: the box's own operator first.
func WhoRank(who string) int {
	switch who {
	case WhoBox:
		return 0
	case WhoPublisher:
		return 1
	case WhoOpenBao:
		return 2
	case WhoTenancy:
		return 3
	}
	return 4
}

// privateTmpNote adds to fix, rendered from raw, that a directory it names lies under /tmp or
// /var/tmp: under the packaged unit (PrivateTmp=yes) that is the unit's own temporary directory,
// which no shell sees, so the command finds nothing there (check config warns of it too).
func (in Input) privateTmpNote(raw, fix string) string {
	p := in.Limits.Paths
	var notes []string
	for _, d := range []struct{ name, key, dir string }{{"{state_dir}", "state_dir", p.StateDir}, {"{deploy_dir}", "deploy_dir", p.DeployDir}} {
		if d.dir == "" || !(strings.Contains(raw, d.name) || strings.Contains(raw, d.dir)) {
			continue
		}
		for _, t := range []string{"/tmp", "/var/tmp"} {
			if d.dir == t || strings.HasPrefix(d.dir, t+"/") {
				notes = append(notes, fmt.Sprintf("%s %s is under %s, which the packaged unit keeps private (PrivateTmp=yes): no shell sees it there; move %s out of %s", d.key, d.dir, t, d.key, t))
				break
			}
		}
	}
	if len(notes) == 0 {
		return fix
	}
	note := strings.Join(notes, "; ")
	if _, comment := shline.Split(fix); comment != "" {
		return fix + "; " + note
	}
	return fix + "   # " + note
}

// sdkMeshFix is a mesh fault's fix on a box whose transport is sdk: no tunneller carries its
// dials (the agent dials with the OpenZiti SDK and the box's identity), so the line asks the
// identity's controller whether it answers, and says what to look at there.
const sdkMeshFix = `curl -skf -o /dev/null "$(sudo -u {user} grep -o 'https://[^"]*' {identity} | head -n 1)/version" && echo the controller answers   # the sdk transport dials with the box's identity, whose controller must answer; then, at the controller, ziti edge list edge-routers (one online) and ziti edge policy-advisor identities monky-host.{env}`

// meshFix is fix as this box's transport makes it true: a line that sends a person to the
// tunneller (ziti-edge-tunnel) is the sdk transport's line on a box that dials with the SDK.
func (in Input) meshFix(fix string) string {
	if in.Limits.Paths.Transport != config.TransportSDK || !strings.Contains(fix, "ziti-edge-tunnel") {
		return fix
	}
	return sdkMeshFix
}
