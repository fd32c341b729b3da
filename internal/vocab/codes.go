package vocab

// Every code the agent journals, reports or finds, and its cause as explain words it. A code of
// tenancy's or OpenBao's that no release of the agent knows has no constant and no row: explain
// says it is one. The spelling is a contract (docs/PROTOCOL.md, docs/JOURNAL.md): it never
// changes.
const (
	BundleInvalid        Code = "BUNDLE_INVALID"
	BundleShaMismatch    Code = "BUNDLE_SHA_MISMATCH"
	BundleEnvMismatch    Code = "BUNDLE_ENV_MISMATCH"
	EnvIncomplete        Code = "ENV_INCOMPLETE"
	ManifestPathRefused  Code = "MANIFEST_PATH_REFUSED"
	PrivilegedRefused    Code = "PRIVILEGED_REFUSED"
	RollbackRefused      Code = "ROLLBACK_REFUSED"
	DiskInsufficient     Code = "DISK_INSUFFICIENT"
	LeaseShape           Code = "LEASE_SHAPE"
	LeaseBudget          Code = "LEASE_BUDGET"
	LeaseRateLimited     Code = "LEASE_RATE_LIMITED"
	RateLimited          Code = "RATE_LIMITED"
	BaoLoginRefused      Code = "BAO_LOGIN_REFUSED"
	SecretReadFailed     Code = "SECRET_READ_FAILED"
	RegistryAuthInvalid  Code = "REGISTRY_AUTH_INVALID"
	ComposePullFailed    Code = "COMPOSE_PULL_FAILED"
	ComposeUpFailed      Code = "COMPOSE_UP_FAILED"
	ReleaseChanged       Code = "RELEASE_CHANGED"
	Unhealthy            Code = "UNHEALTHY"
	CrashLoop            Code = "CRASH_LOOP"
	AgentUnauthenticated Code = "AGENT_UNAUTHENTICATED"
	AgentEnvMismatch     Code = "AGENT_ENV_MISMATCH"
	SDKUnavailable       Code = "SDK_UNAVAILABLE"
	IdentityUnusable     Code = "IDENTITY_UNUSABLE"
	TransportIdentity    Code = "TRANSPORT_IDENTITY"
	ConnectionRefused    Code = "CONNECTION_REFUSED"
	ConnectionReset      Code = "CONNECTION_RESET"
	DNSFailure           Code = "DNS_FAILURE"
	TLSNameMismatch      Code = "TLS_NAME_MISMATCH"
	TLSUnknownCA         Code = "TLS_UNKNOWN_CA"
	TLSCertInvalid       Code = "TLS_CERT_INVALID"
	TLSHandshake         Code = "TLS_HANDSHAKE"
	Timeout              Code = "TIMEOUT"
	Unreachable          Code = "UNREACHABLE"
	MeshNoService        Code = "MESH_NO_SERVICE"
	Cancelled            Code = "CANCELLED"
	BaoPermissionDenied  Code = "BAO_PERMISSION_DENIED"
	ReportPending        Code = "REPORT_PENDING"
	OutboxStuck          Code = "OUTBOX_STUCK"
	BaoUnavailable       Code = "BAO_UNAVAILABLE"
	TicksStopped         Code = "TICKS_STOPPED"
	Temporary            Code = "TEMPORARY"
	TickDeadline         Code = "TICK_DEADLINE"
	LocalFailure         Code = "LOCAL_FAILURE"
	StateFileLocked      Code = "STATE_FILE_LOCKED"
	StateUnwritable      Code = "STATE_UNWRITABLE"
	Held                 Code = "HELD"
	ConfigInvalid        Code = "CONFIG_INVALID"
	TokenExpired         Code = "TOKEN_EXPIRED"
	TokenExpiring        Code = "TOKEN_EXPIRING"
	LeaseEveryTick       Code = "LEASE_EVERY_TICK"
	CheckinShape         Code = "CHECKIN_SHAPE"
	BundleNotFound       Code = "BUNDLE_NOT_FOUND"
	StageFailed          Code = "STAGE_FAILED"
	BundleFetchFailed    Code = "BUNDLE_FETCH_FAILED"
	LeaseFailed          Code = "LEASE_FAILED"
	KVNotFound           Code = "KV_NOT_FOUND"
	KVVersionDeleted     Code = "KV_VERSION_DELETED"
	KVKeyMissing         Code = "KV_KEY_MISSING"
	BaoNotFound          Code = "BAO_NOT_FOUND"
	BaoPath              Code = "BAO_PATH"
	BaoAnswer            Code = "BAO_ANSWER"
	BaoRequestRefused    Code = "BAO_REQUEST_REFUSED"
	CredentialShape      Code = "CREDENTIAL_SHAPE"
	TenancyURL           Code = "TENANCY_URL"
	TLSCAFile            Code = "TLS_CA_FILE"
	NoMapping            Code = "NO_MAPPING"
	TransportConfig      Code = "TRANSPORT_CONFIG"
	TransportUnknown     Code = "TRANSPORT_UNKNOWN"
	DockerNotFound       Code = "DOCKER_NOT_FOUND"
	DockerGroupMissing   Code = "DOCKER_GROUP_MISSING"
	DockerInfoFailed     Code = "DOCKER_INFO_FAILED"
	DockerEngineDown     Code = "DOCKER_ENGINE_DOWN"
	LoaderUnavailable    Code = "LOADER_UNAVAILABLE"
	ComposePSFailed      Code = "COMPOSE_PS_FAILED"
	ComposeLogsFailed    Code = "COMPOSE_LOGS_FAILED"
	ComposeDownFailed    Code = "COMPOSE_DOWN_FAILED"
	DockerPruneFailed    Code = "DOCKER_PRUNE_FAILED"
)

// causes is the one registry of causes: a row for every constant above (a test compares).
var causes = map[Code]Cause{
	BundleInvalid: {KindRefusal, "the bundle breaks the agent's rules: its archive holds a link, a device, `..`, a duplicate, too many entries or bytes, or a `files` list that differs, or a file the agent must read (bundle.json, secrets.manifest.json, the compose file) does not parse; none of it was used",
		NoCommand + "in monky-deploy, fix the bundle and publish it; the new desired sha clears the refusal", ""},
	BundleShaMismatch: {KindRefusal, "the bundle's bytes do not hash to the sha tenancy asked for: it was changed or rebuilt after its sha was computed",
		"find . -type f ! -name .env -printf '%P\\n' | LC_ALL=C sort | xargs -d '\\n' sha256sum | sha256sum   # in the bundle's tree where it is built (monky-deploy): PROTOCOL §2; the refused bytes were never unpacked on this box", "a new desired sha clears it, or `monky-deployd resume` once tenancy serves this sha's true bytes (resume fetches the bundle again)"},
	BundleEnvMismatch: {KindRefusal, "the bundle was rendered for another env than this box's",
		NoCommand + "in monky-deploy, render the bundle for {env} (its descriptor's env), or fix tenancy's desired release for {env}", ""},
	EnvIncomplete: {KindRefusal, "`.env.template` needs variables that no manifest entry supplies, so nothing was started",
		NoCommand + "in monky-deploy, add the entries to the bundle's secrets.manifest.json (or drop the variables from .env.template) and publish it; the new desired sha clears the refusal", ""},
	ManifestPathRefused: {KindRefusal, "a manifest entry points outside `<mount>/data/{env}/see/`, the only place this box may read",
		NoCommand + "in monky-deploy, fix the entry's path in secrets.manifest.json to lie under {kv_mount}/data/{env}/see/ and publish the bundle", ""},
	PrivilegedRefused: {KindRefusal, "the compose file holds what the allowlist of what a service may hold does not allow — power over the host (privileged, the host's network or pid, a capability beyond Docker's defaults, a device, a bind outside the release or of the docker socket), a writable bind of what compose reads again, or a field, option, driver or name no one has listed or that was kept off the list for what it would do (the evidence says) — and the bundle's `agent` profile does not allow it",
		NoCommand + "in monky-deploy, drop each finding from compose.yaml (the evidence says what each would do), or have PROTOCOL.md §2 list a field found harmless; agent.allow_privileged: true is no way around one finding: it turns the policy off for the whole bundle and opens " + PrivilegedOpens, ""},
	RollbackRefused: {KindRefusal, "tenancy asks for a sha this box ran before, and going back needs the bundle's consent",
		NoCommand + "in monky-deploy, set agent.allow_rollback: true in that bundle, or desire a new sha", "a new desired sha, or this sha published again with `agent.allow_rollback: true` (a new sha), clears it; `monky-deployd resume` checks the same bundle again and refuses it again"},
	DiskInsufficient: {KindRefusal, "the image storage has less free space than this bundle needs, so a pull would fill the disk",
		"df -h \"$(sudo -u {user} docker info -f '{{.DockerRootDir}}')\" /var/lib/containerd && sudo -u {user} docker image prune   # removes dangling images (it asks first); else grow the disk or free space outside the images", ""},
	LeaseShape: {KindFailure, "tenancy answered the lease in the old AppRole shape, and the agent has no fallback",
		NoCommand + "tenancy answered in the old AppRole shape; upgrade tenancy", ""},
	LeaseBudget: {KindTemporary, "five leases were asked in the last hour: tenancy's budget is spent, so no sixth is asked",
		"monky-deployd status   # lease_budget.frees_at", ""},
	LeaseRateLimited: {KindTemporary, "tenancy answered the lease with 429 Too Many Requests, and its Retry-After is honoured",
		"monky-deployd status   # nothing to fix: wait", ""},
	RateLimited: {KindTemporary, "tenancy or OpenBao answered 429 Too Many Requests to a call other than the lease (without a code of its own): the next tick asks again, after its Retry-After",
		"monky-deployd status   # nothing to fix: wait; if it lasts, ask who runs tenancy or OpenBao about its rate limit", ""},
	BaoLoginRefused: {KindFailure, "OpenBao refused the login with the lease's grant",
		"bao read {bao_role}   # the env's role; then the grant's login in OpenBao's audit log", ""},
	SecretReadFailed: {KindFailure, "OpenBao refused or could not serve a secret the manifest names",
		"bao kv list -mount={kv_mount} {env}/see   # the entries this box may read (names, no values); the evidence names the entry", ""},
	RegistryAuthInvalid: {KindFailure, "the `use: registry-auth` entry does not hold a registry credential of a known shape",
		"bao kv list -mount={kv_mount} {env}/see   # then fix the registry-auth entry: {\"registry\",\"username\",\"password\"} or username:password", ""},
	ComposePullFailed: {KindFailure, "the registry refused or could not serve an image",
		"sudo ls -l {state_dir}/docker/config.json   # the agent's registry credential; and the manifest's use: registry-auth entry", ""},
	ComposeUpFailed: {KindFailure, "compose could not start the project",
		"sudo -u {user} docker compose -p {project} logs --tail 50", ""},
	ReleaseChanged: {KindFailure, "before a compose call the release directory was not what was verified (a file of the bundle changed, a symlink was planted in its tree) or its resolved model was missing or not the agent's own, so compose was not run; the error names the path",
		"sudo ls -la {deploy_dir}/current/ {deploy_dir}/resolved/   # which service can write the release? an apply's retry stages it again; a heartbeat's clears when the release is restored or a new sha is desired (resume does not clear it)", ""},
	Unhealthy: {KindFailure, "a service is not running and healthy",
		"sudo -u {user} docker compose -p {project} ps", ""},
	CrashLoop: {KindFailure, "the applied release kept failing on this box: the heartbeat healed it heal_budget times in the last hour (compose up of the release) and it is down again, so it is not healed again until the hour frees a heal or a person acts",
		"sudo -u {user} docker compose -p {project} ps --all && sudo -u {user} docker compose -p {project} logs --tail 50", ""},
	AgentUnauthenticated: {KindBlock, "tenancy refused the OpenBao token (the kit was re-revealed, the env retired, or the token revoked) and no fresh bootstrap grant is on disk",
		"sudo ls -l {bootstrap}   # no grant there: re-run the install kit; its new bootstrap.jwt unblocks the next tick", ""},
	AgentEnvMismatch: {KindBlock, "the token is pinned to another env than config.yaml's env_id",
		"grep -n '^env_id' {config}   # config says {env}: fix env_id there (a changed config unblocks), or re-issue the identity and grant for {env}", ""},
	SDKUnavailable: {KindFailure, "`transport: sdk` is set but this build has no OpenZiti SDK",
		"grep -n '^transport' {config}   # set transport: proxy (and enable monky-deployd-proxy.service) or system", ""},
	IdentityUnusable: {KindFailure, "the agent cannot use the box's ziti identity (absent, not readable by its user, or not an identity)",
		"ls -l /opt/openziti/etc/identities/; id {user} | grep -qw ziti || sudo usermod -a -G ziti {user}   # the identity must be readable by the group ziti, which the agent's user must be in", ""},
	TransportIdentity: {KindFailure, "the sdk transport refused the box's ziti identity before the OpenZiti SDK saw it (group- or world-writable, not the JSON an identity is, or a certificate, key or CA that does not parse or match), or the SDK failed on it (the controller refused it, or the SDK panicked and the panic was caught)",
		"grep '^identity:' {config} && sudo -u {user} monky-deployd enroll --force --jwt {state_dir}/monky-host.{env}.jwt   # a group- or world-writable file: chmod 0600 it instead; refused by the controller, or a damaged JSON, certificate, key or CA: a fresh enrolment JWT for monky-host.{env} (ziti edge create identity, at the controller) placed there first", ""},
	ConnectionRefused: {KindTemporary, "nothing listens at the service's address: no intercept for it, or the proxy is down",
		"grep -n '^transport' {config}; systemctl status ziti-edge-tunnel monky-deployd-proxy   # the unit of the config's transport must be active: ziti-edge-tunnel for system, monky-deployd-proxy for proxy", ""},
	ConnectionReset: {KindTemporary, "the far side or the mesh dropped the connection",
		"systemctl status ziti-edge-tunnel", ""},
	DNSFailure: {KindTemporary, "the tunneller's DNS intercept does not know the service's name",
		"resolvectl query monky.tenancy.deploy", ""},
	TLSNameMismatch: {KindFailure, "the certificate the far side shows is not valid for the name the agent dialled",
		"grep -nE 'addr|host' {config}   # bao.addr and tenancy's host must be the intercept's name", ""},
	TLSUnknownCA: {KindFailure, "the far side's certificate is signed by an authority bao.ca_file does not hold",
		"openssl x509 -in {bao_ca} -noout -subject", ""},
	TLSCertInvalid: {KindFailure, "the far side's certificate is not valid (expired, not yet valid, or malformed)",
		"curl -sv \"$(grep -m1 -E '^ +addr:' {config} | awk '{print $2}')\" -o /dev/null 2>&1 | grep -iE 'expire|start date|certificate'   # OpenBao's certificate dates", ""},
	TLSHandshake: {KindFailure, "the TLS handshake with the far side failed",
		"systemctl status ziti-edge-tunnel", ""},
	Timeout: {KindTemporary, "the far side or the mesh did not answer in time",
		"systemctl status ziti-edge-tunnel   # and the service's health", ""},
	Unreachable: {KindTemporary, "the service could not be reached over the mesh",
		"systemctl status ziti-edge-tunnel", ""},
	MeshNoService: {KindFailure, "the mesh's controller offers the service to the box's identity no more: no Dial policy names the identity for it, or the service is gone (the error names both)",
		NoCommand + "at the controller, ziti edge policy-advisor identities, given the identity and the service the error names, says what is missing: a Dial service policy naming the identity, or the service itself", ""},
	Cancelled: {KindTemporary, "a call was cancelled before the far side answered: the agent was stopped (the service stopped or restarted, a signal) while it waited",
		"systemctl status monky-deployd.service; sudo journalctl -u monky-deployd -n 20   # what stopped the agent; the next tick resumes the step", ""},
	BaoPermissionDenied: {KindFailure, "OpenBao refused the token (HTTP 403 permission denied): its policy does not allow the call (renew-self, lookup-self or a KV read), or OpenBao revoked it — OpenBao's refusal, not tenancy's",
		"bao read {bao_role}   # token_policies must allow auth/token/renew-self and the env's KV paths; token_ttl/token_max_ttl", ""},
	ReportPending: {KindTemporary, "tenancy did not acknowledge the report: it waits in the outbox (the box runs what it applied)",
		"monky-deployd status | grep -E '^(last report|outbox|last check-in)'   # then tenancy's health", ""},
	OutboxStuck: {KindFinding, "the report outbox does not drain: tenancy has not acknowledged a report over several ticks",
		"monky-deployd explain -n 5   # the tick-end lines carry tenancy's answer to the report", ""},
	BaoUnavailable: {KindTemporary, "OpenBao answered 5xx (sealed, overloaded, or its storage down) or could not be reached; the step is kept and resumed",
		"curl -s --cacert {bao_ca} {bao_addr}/v1/sys/health; echo   # from the box, through the same intercept: sealed, standby", ""},
	TicksStopped: {KindFinding, "no tick has run for longer than stale_after_s: the timer is not running (stopped, disabled, or every start fails before the tick)",
		"sudo systemctl enable --now monky-deployd.timer && systemctl status monky-deployd.timer; journalctl -u monky-deployd -n 20   # starts the timer if it was stopped or disabled; the journal says why a start failed", ""},
	Temporary: {KindTemporary, "a temporary fault (no code of its own)",
		"monky-deployd explain -n 5", ""},
	TickDeadline: {KindTemporary, "the tick ran past tick_timeout_s and stopped at a step boundary (committed, resumed next tick)",
		"monky-deployd explain -n 3   # the step durations show what was slow", ""},
	LocalFailure: {KindFailure, "the agent's own files failed it (state_dir, the token file, the lock file, deploy_dir or the state file): nothing was sent",
		"sudo ls -la {state_dir} {deploy_dir} && sudo -u {user} monky-deployd run --once   # the listing shows what the agent refuses: a symlink (->) for bao.token, lock or state.db, a file not owned by {user}, a group- or world-writable mode; a bao.token removed as unusable is made again from a fresh bootstrap.jwt: re-run the install kit first", ""},
	StateFileLocked: {KindTemporary, "another process (status, explain, the bbolt CLI) held the state file longer than a tick waits for it (15 s), so the tick could not open it and ended without touching the box; the next tick tries again",
		"sudo journalctl -u monky-deployd -n 5   # the tick's closing line names the holder (pid and command): end it, or let it finish; the next tick runs", ""},
	Held: {KindFinding, "a person held the box (monky-deployd hold): it checks in, heartbeats and reports, and applies and heals wait until the hold ends",
		"monky-deployd hold --release   # ends the hold now; else it ends by itself at its time", ""},
	StateUnwritable: {KindFailure, "the agent could not write its own files (state_dir, deploy_dir or the state file): the disk is full, over quota or mounted read-only; the step is not counted as an attempt and goes on by itself once the file can be written",
		"df -h {state_dir} {deploy_dir}; findmnt -no OPTIONS -T {state_dir}   # free space (images no release uses, old logs) or remount it read-write; the next tick goes on by itself", ""},
	ConfigInvalid: {KindFailure, "the config file (config.yaml) could not be read or was refused (an unknown key, a value out of range, its owner or mode), so no tick ran",
		"monky-deployd check config {config}   # names each problem's line and key", ""},
	TokenExpired: {KindFinding, "the box's OpenBao token has expired: it was not renewed and no new lease replaced it",
		"sudo ls -l {bootstrap} && sudo -u {user} monky-deployd bootstrap --force   # no grant there: re-run the install kit", ""},
	TokenExpiring: {KindFinding, "the box's OpenBao token is about to expire and is not being kept alive: renew-self no longer extends it (its max ttl) and no new lease replaced it",
		"monky-deployd explain -n 10 | grep -E 'renew|token-swap|lease'   # what the renewals and the swap answered", ""},
	LeaseEveryTick: {KindFinding, "the box asks tenancy for a lease at every tick: its token cannot be kept from one tick to the next (a max ttl under renew_below_s, or a token refused at every renewal)",
		"bao read {bao_role}; monky-deployd explain -n 5   # token_max_ttl must be well above bao.renew_below_s (default 6 h); the renewals and leases of the last ticks", ""},
	CheckinShape: {KindFailure, "tenancy's check-in answer has a shape the agent cannot trust (a sha that is not 64 lowercase hex, an unknown action, a vault.mount holding a control character or a byte outside ASCII)",
		"monky-deployd explain -n 3   # the answer's fault; upgrade tenancy, or report it to its maintainers", ""},
	BundleNotFound: {KindFailure, "tenancy answered 404 for the bundle of the desired sha: its publisher has not published one for it",
		NoCommand + "in monky-deploy, publish the bundle of {sha}, or desire another sha; the box applies it at its next retry", ""},
	StageFailed: {KindFailure, "the agent could not write the release directory or the registry credential",
		"sudo ls -la {deploy_dir} {state_dir}/docker; df -h {deploy_dir}   # owner {user}", ""},
	BundleFetchFailed: {KindFailure, "tenancy refused to serve the desired sha's bundle (an answer that waiting does not change)",
		"monky-deployd status | grep '^desired'   # then tenancy's log for GET /v1/agent/bundle/{env}/ and that sha", ""},
	LeaseFailed: {KindFailure, "tenancy refused the lease (an answer other than 429 that waiting does not change)",
		"monky-deployd explain -n 3   # tenancy's answer; then the env's deploy grant in tenancy's console and its log for POST /v1/agent/lease", ""},
	KVNotFound: {KindFailure, "a secret the manifest names has no data in OpenBao at that path (or that version)",
		"bao kv list -mount={kv_mount} {env}/see   # the entries that exist; then set the secret the evidence names in OpenBao", ""},
	KVVersionDeleted: {KindFailure, "the version of a secret the manifest pins is deleted or destroyed in OpenBao",
		"bao kv list -mount={kv_mount} {env}/see   # then bao kv metadata get on the entry the evidence names: undelete its version, or publish the bundle with a live version", ""},
	KVKeyMissing: {KindFailure, "a secret the manifest names exists but lacks the key the entry reads (the evidence lists the keys it has)",
		"bao kv list -mount={kv_mount} {env}/see   # then add the key to the secret the evidence names, or fix the entry's key in the manifest", ""},
	BaoNotFound: {KindFailure, "OpenBao answered 404: the auth mount, the role or the KV mount the config names does not exist there",
		"grep -A6 '^bao:' {config}   # auth_mount, role, kv_mount must match OpenBao's", ""},
	BaoPath: {KindFailure, "a manifest entry's path is empty or not clean (`..`, `//`, a trailing `/`), so it was not read",
		NoCommand + "in monky-deploy, fix the entry's path in the bundle's secrets.manifest.json (no .., //, trailing /) and publish the bundle", ""},
	BaoAnswer: {KindFailure, "OpenBao's answer was not one the agent can use: none, too large, not JSON, or not a KV-v2 secret (the path must be <mount>/data/…)",
		"curl -s --cacert {bao_ca} {bao_addr}/v1/sys/health; echo   # from the box: is it OpenBao that answers (not a proxy's page)? KV paths must be {kv_mount}/data/…", ""},
	BaoRequestRefused: {KindFailure, "OpenBao refused the request with an answer the agent has no other name for (the evidence holds OpenBao's words)",
		"monky-deployd explain -n 5   # the entry holds OpenBao's words; then OpenBao's audit log for the box's token at that time", ""},
	CredentialShape: {KindFailure, "a credential is empty, too long or not printable ASCII (the stored token file, the token in OpenBao's login answer, or the login_jwt in tenancy's lease), so it was not used",
		"sudo wc -c {state_dir}/bao.token && grep -A3 '^bao:' {config}   # a stored token of 0 or over 8192 bytes is not one; an answer's token comes from bao.addr: OpenBao's own listener, not a proxy's page", ""},
	TenancyURL: {KindFailure, "tenancy's base URL, or a URL in tenancy's answer (bundle_url), is not one the agent may call",
		"grep -A4 '^tenancy:' {config}   # base_url; a bundle_url must stay on tenancy's host", ""},
	TLSCAFile: {KindFailure, "the CA file the config names is unreadable or holds no PEM certificate",
		"sudo -u {user} openssl x509 -noout -subject -in {bao_ca}   # and tenancy.ca_file in {config}, if set", ""},
	NoMapping: {KindFailure, "the transport was asked for an address it maps to no intercept: only tenancy's and OpenBao's are",
		"grep -E 'addr|host|port|base_url' {config}   # bao.addr and tenancy's name must be the intercepts'", ""},
	TransportConfig: {KindFailure, "the transport's own settings are incomplete or wrong (proxy_addr for `proxy`, the identity for `sdk`)",
		"grep -E 'transport|proxy_addr|identity' {config}", ""},
	TransportUnknown: {KindFailure, "config.yaml names no transport, or one this build does not have",
		"monky-deployd version   # the transports built in; then set transport: in {config} to one of them", ""},
	DockerNotFound: {KindFailure, "the docker CLI (docker_bin) is not there, so compose could not run",
		"sudo apt-get install -y docker-ce docker-ce-cli docker-compose-plugin   # Docker Engine with compose v2, from Docker's apt repository (download.docker.com/linux/debian); or set docker_bin in {config} to where the CLI is", ""},
	DockerGroupMissing: {KindFailure, "docker's socket refuses the agent's user: it is not in the socket's group (docker), so no compose call can run; the tick stopped before checking in",
		"sudo usermod -aG docker {user}   # the next tick runs with it (no docker group: install Docker Engine first)", ""},
	LoaderUnavailable: {KindTemporary, "the loader child that reads a release's model (the agent's own binary, re-executed within its bounds) could not start or answer: the binary was replaced or removed under the running agent (a package upgrade), or the child failed or died for no bound's reason; nothing was decided about the release, which is loaded again at the next tick",
		"ls -l /usr/bin/monky-deployd && dpkg -s monky-deployd | grep -i '^version' && sudo -u {user} monky-deployd run --once   # the binary as the package left it; the tick loads the release again", ""},
	DockerEngineDown: {KindTemporary, "the Docker engine (dockerd) does not answer: the daemon is stopped or its socket refuses; the CLI is there, but nothing can run, so no lease is asked and no secret read until it answers",
		"sudo systemctl start docker.socket docker.service && systemctl is-active docker.service   # the next tick goes on by itself; if it will not start, the docker unit's journal says why", ""},
	DockerInfoFailed: {KindFailure, "`docker info` failed: the engine is down or the agent's user may not use it",
		"systemctl status docker; id {user}   # the user must be in the docker group", ""},
	ComposePSFailed: {KindFailure, "`docker compose ps` failed, so the agent could not see the project's containers",
		"sudo -u {user} docker compose -p {project} ps", ""},
	ComposeLogsFailed: {KindFailure, "`docker compose logs` failed, so the report carries no log tail",
		"sudo -u {user} docker compose -p {project} logs --tail 50", ""},
	ComposeDownFailed: {KindFailure, "`docker compose down` failed for tenancy's action down",
		"sudo -u {user} docker compose -p {project} down && sudo -u {user} monky-deployd resume", ""},
	DockerPruneFailed: {KindFailure, "removing the images no kept release uses (after an apply, before a disk refusal, or `run --prune`) failed; the apply itself stands",
		"sudo -u {user} docker image prune   # prints why it fails; the apply itself stands", ""},
}
