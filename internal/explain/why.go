package explain

import (
	"fmt"
	"strings"
	"time"

	"github.com/tikali/monky-deployd/machine"
	"github.com/tikali/monky-deployd/store"
)

// Why is the answer to "why did the update not happen": the code, the real fault in one
// sentence, the evidence the agent recorded (its own words, never a value), what the agent does
// next and when, and the one command that fixes or checks it.
type Why struct {
	Code     string    `json:"code"`
	Fault    string    `json:"fault"`
	Evidence string    `json:"evidence"`
	Next     string    `json:"next"`
	Fix      string    `json:"fix"`
	At       time.Time `json:"at"` // when the agent recorded it
	Tick     uint64    `json:"tick,omitempty"`
}

// cause is the fixed part of a code's explanation.
type cause struct {
	fault string
	fix   string // may hold {project} and {env}
}

// causes holds every refusal, failure, block and temporary code the journal can carry.
var causes = map[string]cause{
	"BUNDLE_INVALID": {"the bundle breaks the agent's rules: its archive holds a link, a device, `..`, a duplicate, too many entries or bytes, or a `files` list that differs, or a file the agent must read (bundle.json, secrets.manifest.json, the compose file) does not parse; none of it was used",
		"fix the bundle in monky-deploy and publish it; the new desired sha clears the refusal"},
	"BUNDLE_SHA_MISMATCH": {"the bundle's bytes do not hash to the sha tenancy asked for: it was changed or rebuilt after its sha was computed",
		"cd releases/<sha> && find . -type f ! -name .env -printf '%P\\n' | LC_ALL=C sort | xargs -d '\\n' sha256sum | sha256sum   # PROTOCOL §2"},
	"BUNDLE_ENV_MISMATCH": {"the bundle was rendered for another env than this box's",
		"fix the bundle's env in its descriptor, or tenancy's desired release for {env}"},
	"ENV_INCOMPLETE": {"`.env.template` needs variables that no manifest entry supplies, so nothing was started",
		"add the entries to secrets.manifest.json, or set the secrets in the console"},
	"MANIFEST_PATH_REFUSED": {"a manifest entry points outside `<mount>/data/{env}/see/`, the only place this box may read",
		"fix the entry's path in secrets.manifest.json"},
	"PRIVILEGED_REFUSED": {"a service asks for power over the host (privileged, host network or pid, SYS_ADMIN or ALL, or a bind of / or the docker socket) and the bundle's `agent` profile does not allow it",
		"drop the finding from compose.yaml, or set `agent.allow_privileged: true` in the bundle when the service truly needs it"},
	"ROLLBACK_REFUSED": {"tenancy asks for a sha this box ran before, and going back needs the bundle's consent",
		"set `agent.allow_rollback: true` in that bundle, or desire a new sha"},
	"DISK_INSUFFICIENT": {"the image storage has less free space than this bundle needs, so a pull would fill the disk",
		"df -h $(docker info -f '{{.DockerRootDir}}') /var/lib/containerd   # then grow it or `docker image prune`"},
	"LEASE_SHAPE": {"tenancy answered the lease in the old AppRole shape, and the agent has no fallback",
		"upgrade tenancy"},
	"LEASE_BUDGET": {"five leases were asked in the last hour: tenancy's budget is spent, so no sixth is asked",
		"monky-deployd status   # lease_budget.frees_at"},
	"LEASE_RATE_LIMITED": {"tenancy answered the lease with 429 Too Many Requests, and its Retry-After is honoured",
		"monky-deployd status   # nothing to fix: wait"},
	"BAO_LOGIN_REFUSED": {"OpenBao refused the login with the lease's grant",
		"check the env's role and the grant in OpenBao's audit log"},
	"SECRET_READ_FAILED": {"OpenBao refused or could not serve a secret the manifest names",
		"bao kv metadata get -mount=<mount> <path>   # the entry's path and version (no value)"},
	"REGISTRY_AUTH_INVALID": {"the `use: registry-auth` entry does not hold a registry credential of a known shape",
		"bao kv metadata get -mount=<mount> <path>   # then fix the entry: {\"registry\",\"username\",\"password\"} or username:password"},
	"COMPOSE_PULL_FAILED": {"the registry refused or could not serve an image",
		"sudo ls -l /var/lib/monky-deployd/docker/config.json   # and `use: registry-auth` in the manifest"},
	"COMPOSE_UP_FAILED": {"compose could not start the project",
		"cd <deploy_dir>/current && docker compose -p {project} logs --tail 50"},
	"UNHEALTHY": {"a service is not running and healthy",
		"docker compose -p {project} ps"},
	"AGENT_UNAUTHENTICATED": {"tenancy refused the OpenBao token (the kit was re-revealed, the env retired, or the token revoked) and no fresh bootstrap grant is on disk",
		"re-run the install kit (a new bootstrap.jwt unblocks), or `monky-deployd bootstrap --force`"},
	"AGENT_ENV_MISMATCH": {"the token is pinned to another env than config.yaml's env_id",
		"fix env_id in /etc/monky-deployd/config.yaml (a changed config unblocks), or re-issue the identity and grant"},
	"SDK_UNAVAILABLE": {"`transport: sdk` is set but this build has no OpenZiti SDK",
		"set `transport: proxy` (and enable monky-deployd-proxy.service) or `system`"},
	"IDENTITY_UNUSABLE": {"the agent cannot use the box's ziti identity (absent, not readable by its user, or not an identity)",
		"ls -l /opt/openziti/etc/identities/ && id monky-deployd   # must list ziti; else usermod -a -G ziti monky-deployd"},
	"CONNECTION_REFUSED": {"nothing listens at the service's address: no intercept for it, or the proxy is down",
		"systemctl status ziti-edge-tunnel   # proxy transport: systemctl status monky-deployd-proxy"},
	"CONNECTION_RESET": {"the far side or the mesh dropped the connection",
		"systemctl status ziti-edge-tunnel"},
	"DNS_FAILURE": {"the tunneller's DNS intercept does not know the service's name",
		"resolvectl query monky.tenancy.deploy"},
	"TLS_NAME_MISMATCH": {"the certificate the far side shows is not valid for the name the agent dialled",
		"check bao.addr (or the tenancy host) in config.yaml against the intercept name"},
	"TLS_UNKNOWN_CA": {"the far side's certificate is signed by an authority bao.ca_file does not hold",
		"openssl x509 -in /etc/monky-deployd/openbao-ca.pem -noout -subject"},
	"TLS_CERT_INVALID": {"the far side's certificate is not valid (expired, not yet valid, or malformed)",
		"openssl s_client -connect <host>:<port> </dev/null | openssl x509 -noout -dates"},
	"TLS_HANDSHAKE": {"the TLS handshake with the far side failed",
		"systemctl status ziti-edge-tunnel"},
	"TIMEOUT": {"the far side or the mesh did not answer in time",
		"systemctl status ziti-edge-tunnel   # and the service's health"},
	"UNREACHABLE": {"the service could not be reached over the mesh",
		"systemctl status ziti-edge-tunnel"},
}

// temporaryEvents are the journal notes a tick ends on when it could not go on now.
var temporaryEvents = map[string]string{
	"checkin-failed":   "the check-in did not get an answer",
	"lease-deferred":   "the apply needs a new lease (the token in hand no longer reads the secrets) and none was granted this tick",
	"login-failed":     "OpenBao was unreachable for the login after the lease",
	"bootstrap-failed": "OpenBao was unreachable for the bootstrap login",
	"fetch-failed":     "the bundle could not be fetched",
}

// whyInput is what the answer is built from: the record, the newest tick's entries and the
// budget, all read in one transaction.
type whyInput struct {
	rec     store.Record
	last    []store.Entry // the newest tick's entries
	lastSum store.TickSummary
	used    int
	frees   time.Time
	outbox  int
	now     time.Time
}

// explainWhy names the one thing standing between the box and tenancy's desired sha, or nil
// when nothing does (converged, or a flight that goes on by itself).
func explainWhy(in whyInput) *Why {
	rec := in.rec
	project := "monky-" + rec.EnvID
	if rec.EnvID == "" {
		project = "monky-<env>"
	}
	mk := func(code, fault, evidence, next string, at time.Time, tick uint64) *Why {
		c, ok := causes[code]
		if fault == "" {
			fault = c.fault
		}
		fix := c.fix
		if !ok || fix == "" {
			fix = "monky-deployd explain --json | jq .why"
		}
		env := rec.EnvID
		if env == "" {
			env = "<env>"
		}
		fix = strings.NewReplacer("{project}", project, "{env}", env).Replace(fix)
		return &Why{Code: code, Fault: sentence(fault), Evidence: evidence, Next: sentence(next), Fix: fix, At: at.UTC(), Tick: tick}
	}
	nextTick := in.nextTickWords()

	// A block first: a blocked tick touches nothing else.
	if stateOf(rec) == "Blocked" && rec.Block != nil {
		b := rec.Block
		next := "every tick exits 1 at once without touching the network until a new bootstrap.jwt appears (the next tick looks " + nextTick + ") or `monky-deployd bootstrap --force`"
		if b.Code == "AGENT_ENV_MISMATCH" {
			next = "every tick exits 78 at once without touching the network until config.yaml changes or `monky-deployd resume`"
		}
		return mk(b.Code, "", trimCode(b.Code, b.Detail), next, b.At, in.blockTick())
	}
	// A tick that could not go on now: its note is the fault of the moment.
	if e, ok := in.temporary(); ok {
		fault := temporaryEvents[e.Event]
		if c, known := causes[e.Code]; known {
			fault += ": " + c.fault
		}
		next := "the next tick (" + nextTick + ") tries again; nothing is lost"
		switch {
		case e.Code == "LEASE_BUDGET":
			next = fmt.Sprintf("the budget frees a slot at %s; the first tick after it asks the lease and the apply goes on", clockS(in.frees))
			if in.frees.IsZero() || !in.now.Before(in.frees) {
				next = "a slot is free again: the next tick (" + nextTick + ") asks the lease and the apply goes on"
			}
		case e.Code == "LEASE_RATE_LIMITED" && in.now.Before(rec.LeaseRetryAfter):
			next = "no lease before " + clockS(rec.LeaseRetryAfter) + " (tenancy's Retry-After); then the apply goes on by itself"
		case e.Event == "login-failed":
			next = "the next tick (" + nextTick + ") logs in with the kept grant; no second lease is asked"
		case e.Event == "bootstrap-failed":
			next = "the next tick (" + nextTick + ") logs in with the bootstrap grant, which stays on disk"
		}
		code := e.Code
		if code == "" {
			code = strings.ToUpper(strings.ReplaceAll(e.Event, "-", "_"))
		}
		w := mk(code, fault, trimCode(e.Code, e.Detail), next, e.At, e.Tick)
		if _, known := causes[e.Code]; !known && e.Event == "checkin-failed" {
			w.Fix = "systemctl status ziti-edge-tunnel   # and tenancy's health"
		}
		return w
	}
	switch stateOf(rec) {
	case "Refused":
		r := rec.Refusal
		if r == nil {
			return nil
		}
		next := fmt.Sprintf("sha %s stays refused: it is not fetched again; a new desired sha starts over, and `monky-deployd resume` re-runs the checks at the next tick", short(r.Sha))
		if r.Code == "DISK_INSUFFICIENT" {
			next = "measured again at every tick (the next " + nextTick + "); the apply goes on by itself once the space is there"
		}
		return mk(r.Code, "", trimCode(r.Code, r.Detail), next, r.At, in.tickOf(r.Code, r.At))
	case "Failed":
		f := rec.Failure
		if f == nil {
			return nil
		}
		n := rec.TotalAttempts()
		var next string
		switch {
		case rec.Action == "none":
			next = "checked again at every tick (the next " + nextTick + "); reported failed to tenancy until the service is healthy"
		case rec.Parked:
			next = fmt.Sprintf("parked after %d failed attempts of %s: nothing is tried until `monky-deployd resume` or a new desired sha", n, short(f.Sha))
		default:
			next = fmt.Sprintf("attempt %d of %d failed (the step from %s); retry %d of %d at %s (backoff), unless tenancy desires another sha first", n, machine.MaxAttempts, f.State, n+1, machine.MaxAttempts, clockS(rec.NextRetryAt))
		}
		fault := causes[f.Code].fault
		switch {
		case f.Code == "COMPOSE_PULL_FAILED":
			fault = pullFault(f.Detail)
		case f.Code == "UNHEALTHY" && rec.Action == "none":
			fault = "the heartbeat found a service not running or not healthy"
		case f.Code == "UNHEALTHY":
			fault = "a service did not turn healthy within healthy_timeout_s after compose up"
		}
		w := mk(f.Code, fault, trimCode(f.Code, f.Detail), next, f.At, in.tickOf(f.Code, f.At))
		if f.Code == "COMPOSE_PULL_FAILED" {
			if fix := pullFix(f.Detail); fix != "" {
				w.Fix = fix
			}
		}
		return w
	}
	if in.outbox > 0 {
		return &Why{Code: "REPORT_PENDING", Fault: sentence(fmt.Sprintf("tenancy has not acknowledged %d report(s)", in.outbox)),
			Evidence: in.lastDetail(), Next: sentence("the outbox is sent again at the next tick (" + nextTick + ")"),
			Fix: "monky-deployd status --json | jq .last_report", At: in.lastSum.StartedAt.UTC(), Tick: in.lastSum.Tick}
	}
	return nil
}

// pullFix is the one command for a pull fault the registry's words name, "" for the default.
func pullFix(detail string) string {
	d := strings.ToLower(detail)
	switch {
	case strings.Contains(d, "no basic auth credentials") || strings.Contains(d, "unauthorized") || strings.Contains(d, "denied"):
		return ""
	case strings.Contains(d, "manifest unknown") || strings.Contains(d, "not found"):
		return "docker manifest inspect <image from the message>   # the tag must exist in the registry; else fix the bundle's compose.yaml"
	case strings.Contains(d, "no such host") || strings.Contains(d, "lookup "):
		return "getent hosts <registry host from the message>   # the box's DNS must resolve the registry"
	}
	return ""
}

// pullFault reads the registry's own words for the kind of fault.
func pullFault(detail string) string {
	d := strings.ToLower(detail)
	switch {
	case strings.Contains(d, "no basic auth credentials") || strings.Contains(d, "unauthorized") || strings.Contains(d, "denied"):
		return "the registry refused the pull: the agent's credential is missing or wrong (a `docker login` by hand is invisible to it)"
	case strings.Contains(d, "manifest unknown") || strings.Contains(d, "not found"):
		return "the registry does not hold an image the bundle names (tag or repository absent)"
	case strings.Contains(d, "no such host") || strings.Contains(d, "lookup "):
		return "the registry's name does not resolve on this box"
	}
	return causes["COMPOSE_PULL_FAILED"].fault
}

// temporary is the newest tick's note about a step that could not go on now, when the tick
// did not end well.
func (in whyInput) temporary() (store.Entry, bool) {
	if in.lastSum.Exit != nil && *in.lastSum.Exit == 0 {
		return store.Entry{}, false
	}
	for i := len(in.last) - 1; i >= 0; i-- {
		e := in.last[i]
		if _, ok := temporaryEvents[e.Event]; ok {
			return e, true
		}
		if e.From != e.To { // a transition after the note: the tick went on
			return store.Entry{}, false
		}
	}
	return store.Entry{}, false
}

func (in whyInput) tickOf(code string, at time.Time) uint64 {
	for _, e := range in.last {
		if e.Code == code && e.At.Equal(at) {
			return e.Tick
		}
	}
	return 0
}

func (in whyInput) blockTick() uint64 {
	for _, e := range in.last {
		if e.To == "Blocked" {
			return e.Tick
		}
	}
	return 0
}

func (in whyInput) lastDetail() string {
	if n := len(in.last); n > 0 {
		return in.last[n-1].Detail
	}
	return ""
}

// nextTickWords says when the next tick is due: the timer's minute (or tenancy's interval)
// after the last one.
func (in whyInput) nextTickWords() string {
	if in.rec.LastTickAt.IsZero() {
		return "within a minute"
	}
	iv := 60 * time.Second
	if in.rec.IntervalS > 0 {
		iv = time.Duration(in.rec.IntervalS) * time.Second
	}
	return "about " + clockS(in.rec.LastTickAt.Add(iv))
}

func clockS(t time.Time) string { return t.UTC().Format("15:04:05") }

func trimCode(code, detail string) string {
	if code != "" {
		detail = strings.TrimPrefix(detail, code+": ")
		detail = strings.TrimPrefix(detail, "still refused: "+code+": ")
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
