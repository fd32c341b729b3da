package vocab

// Every code the agent journals, reports or finds, and its cause as explain words it. A code of
// tenancy's or OpenBao's that no release of the agent knows has no constant and no row: explain
// says it is one. The spelling is a contract (AGENT.md, PROTOCOL.md): it never changes.
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
	BaoLoginRefused      Code = "BAO_LOGIN_REFUSED"
	SecretReadFailed     Code = "SECRET_READ_FAILED"
	RegistryAuthInvalid  Code = "REGISTRY_AUTH_INVALID"
	ComposePullFailed    Code = "COMPOSE_PULL_FAILED"
	ComposeUpFailed      Code = "COMPOSE_UP_FAILED"
	ReleaseChanged       Code = "RELEASE_CHANGED"
	Unhealthy            Code = "UNHEALTHY"
	AgentUnauthenticated Code = "AGENT_UNAUTHENTICATED"
	AgentEnvMismatch     Code = "AGENT_ENV_MISMATCH"
	SDKUnavailable       Code = "SDK_UNAVAILABLE"
	IdentityUnusable     Code = "IDENTITY_UNUSABLE"
	ConnectionRefused    Code = "CONNECTION_REFUSED"
	ConnectionReset      Code = "CONNECTION_RESET"
	DNSFailure           Code = "DNS_FAILURE"
	TLSNameMismatch      Code = "TLS_NAME_MISMATCH"
	TLSUnknownCA         Code = "TLS_UNKNOWN_CA"
	TLSCertInvalid       Code = "TLS_CERT_INVALID"
	TLSHandshake         Code = "TLS_HANDSHAKE"
	Timeout              Code = "TIMEOUT"
	Unreachable          Code = "UNREACHABLE"
	Cancelled            Code = "CANCELLED"
	BaoPermissionDenied  Code = "BAO_PERMISSION_DENIED"
	ReportPending        Code = "REPORT_PENDING"
	OutboxStuck          Code = "OUTBOX_STUCK"
	BaoUnavailable       Code = "BAO_UNAVAILABLE"
	TicksStopped         Code = "TICKS_STOPPED"
	Temporary            Code = "TEMPORARY"
	TickDeadline         Code = "TICK_DEADLINE"
	LocalFailure         Code = "LOCAL_FAILURE"
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
	ComposePSFailed      Code = "COMPOSE_PS_FAILED"
	ComposeLogsFailed    Code = "COMPOSE_LOGS_FAILED"
	ComposeDownFailed    Code = "COMPOSE_DOWN_FAILED"
	DockerPruneFailed    Code = "DOCKER_PRUNE_FAILED"
)

// causes is the one registry of causes: a row for every constant above (a test compares).
var causes = map[Code]Cause{
	BundleInvalid: {KindRefusal, "the bundle breaks the agent's rules: its archive holds a link, a device, `..`, a duplicate, too many entries or bytes, or a `files` list that differs, or a file the agent must read (bundle.json, secrets.manifest.json, the compose file) does not parse; none of it was used",
		"fix the bundle in monky-deploy and publish it; the new desired sha clears the refusal", ""},
	BundleShaMismatch: {KindRefusal, "the bundle's bytes do not hash to the sha tenancy asked for: it was changed or rebuilt after its sha was computed",
		"find . -type f ! -name .env -printf '%P\\n' | LC_ALL=C sort | xargs -d '\\n' sha256sum | sha256sum   # in the bundle's tree where it is built (monky-deploy): PROTOCOL §2; the refused bytes were never unpacked on this box", "a new desired sha clears it, or `monky-deployd resume` once tenancy serves this sha's true bytes (resume fetches the bundle again)"},
	BundleEnvMismatch: {KindRefusal, "the bundle was rendered for another env than this box's",
		"fix the bundle's env in its descriptor, or tenancy's desired release for {env}", ""},
	EnvIncomplete: {KindRefusal, "`.env.template` needs variables that no manifest entry supplies, so nothing was started",
		"add the entries to the bundle's secrets.manifest.json (or drop the variables from .env.template) and publish the bundle: the new desired sha clears the refusal", ""},
	ManifestPathRefused: {KindRefusal, "a manifest entry points outside `<mount>/data/{env}/see/`, the only place this box may read",
		"fix the entry's path in secrets.manifest.json", ""},
	PrivilegedRefused: {KindRefusal, "the compose file holds what the allowlist of what a service may hold does not allow — power over the host (privileged, the host's network or pid, a capability beyond Docker's defaults, a device, a bind outside the release or of the docker socket), a writable bind of what compose reads again, or a field, option, driver or name no one has listed — and the bundle's `agent` profile does not allow it",
		"drop the finding from compose.yaml, or set `agent.allow_privileged: true` in the bundle when the service truly needs it", ""},
	RollbackRefused: {KindRefusal, "tenancy asks for a sha this box ran before, and going back needs the bundle's consent",
		"set `agent.allow_rollback: true` in that bundle, or desire a new sha", "a new desired sha, or this sha published again with `agent.allow_rollback: true` (a new sha), clears it; `monky-deployd resume` checks the same bundle again and refuses it again"},
	DiskInsufficient: {KindRefusal, "the image storage has less free space than this bundle needs, so a pull would fill the disk",
		"df -h $(docker info -f '{{.DockerRootDir}}') /var/lib/containerd   # then grow it or `docker image prune`", ""},
	LeaseShape: {KindFailure, "tenancy answered the lease in the old AppRole shape, and the agent has no fallback",
		"upgrade tenancy", ""},
	LeaseBudget: {KindTemporary, "five leases were asked in the last hour: tenancy's budget is spent, so no sixth is asked",
		"monky-deployd status   # lease_budget.frees_at", ""},
	LeaseRateLimited: {KindTemporary, "tenancy answered the lease with 429 Too Many Requests, and its Retry-After is honoured",
		"monky-deployd status   # nothing to fix: wait", ""},
	BaoLoginRefused: {KindFailure, "OpenBao refused the login with the lease's grant",
		"check the env's role and the grant in OpenBao's audit log", ""},
	SecretReadFailed: {KindFailure, "OpenBao refused or could not serve a secret the manifest names",
		"bao kv metadata get -mount=<mount> <path>   # the entry's path and version (no value)", ""},
	RegistryAuthInvalid: {KindFailure, "the `use: registry-auth` entry does not hold a registry credential of a known shape",
		"bao kv metadata get -mount=<mount> <path>   # then fix the entry: {\"registry\",\"username\",\"password\"} or username:password", ""},
	ComposePullFailed: {KindFailure, "the registry refused or could not serve an image",
		"sudo ls -l {state_dir}/docker/config.json   # and `use: registry-auth` in the manifest", ""},
	ComposeUpFailed: {KindFailure, "compose could not start the project",
		"cd {deploy_dir}/current && docker compose -p {project} logs --tail 50", ""},
	ReleaseChanged: {KindFailure, "before a compose call the release directory was not what was verified (a file of the bundle changed, a symlink was planted in its tree) or its resolved model was missing or not the agent's own, so compose was not run; the error names the path",
		"ls -la {deploy_dir}/current/ {deploy_dir}/resolved/   # which service can write the release? an apply's retry stages it again; a heartbeat's clears when the release is restored or a new sha is desired (resume does not clear it)", ""},
	Unhealthy: {KindFailure, "a service is not running and healthy",
		"docker compose -p {project} ps", ""},
	AgentUnauthenticated: {KindBlock, "tenancy refused the OpenBao token (the kit was re-revealed, the env retired, or the token revoked) and no fresh bootstrap grant is on disk",
		"re-run the install kit (a new bootstrap.jwt unblocks), or `monky-deployd bootstrap --force`", ""},
	AgentEnvMismatch: {KindBlock, "the token is pinned to another env than config.yaml's env_id",
		"fix env_id in {config} (a changed config unblocks), or re-issue the identity and grant", ""},
	SDKUnavailable: {KindFailure, "`transport: sdk` is set but this build has no OpenZiti SDK",
		"set `transport: proxy` (and enable monky-deployd-proxy.service) or `system`", ""},
	IdentityUnusable: {KindFailure, "the agent cannot use the box's ziti identity (absent, not readable by its user, or not an identity)",
		"ls -l /opt/openziti/etc/identities/ && id monky-deployd   # must list ziti; else usermod -a -G ziti monky-deployd", ""},
	ConnectionRefused: {KindTemporary, "nothing listens at the service's address: no intercept for it, or the proxy is down",
		"systemctl status ziti-edge-tunnel   # proxy transport: systemctl status monky-deployd-proxy", ""},
	ConnectionReset: {KindTemporary, "the far side or the mesh dropped the connection",
		"systemctl status ziti-edge-tunnel", ""},
	DNSFailure: {KindTemporary, "the tunneller's DNS intercept does not know the service's name",
		"resolvectl query monky.tenancy.deploy", ""},
	TLSNameMismatch: {KindFailure, "the certificate the far side shows is not valid for the name the agent dialled",
		"check bao.addr (or the tenancy host) in config.yaml against the intercept name", ""},
	TLSUnknownCA: {KindFailure, "the far side's certificate is signed by an authority bao.ca_file does not hold",
		"openssl x509 -in {bao_ca} -noout -subject", ""},
	TLSCertInvalid: {KindFailure, "the far side's certificate is not valid (expired, not yet valid, or malformed)",
		"openssl s_client -connect <host>:<port> </dev/null | openssl x509 -noout -dates", ""},
	TLSHandshake: {KindFailure, "the TLS handshake with the far side failed",
		"systemctl status ziti-edge-tunnel", ""},
	Timeout: {KindTemporary, "the far side or the mesh did not answer in time",
		"systemctl status ziti-edge-tunnel   # and the service's health", ""},
	Unreachable: {KindTemporary, "the service could not be reached over the mesh",
		"systemctl status ziti-edge-tunnel", ""},
	Cancelled: {KindTemporary, "a call was cancelled before the far side answered: the agent was stopped (the service stopped or restarted, a signal) while it waited",
		"systemctl status monky-deployd.service   # what stopped the agent (journalctl -u monky-deployd -n 20); the next tick resumes the step", ""},
	BaoPermissionDenied: {KindFailure, "OpenBao refused the token (HTTP 403 permission denied): its policy does not allow the call (renew-self, lookup-self or a KV read), or OpenBao revoked it — OpenBao's refusal, not tenancy's",
		"bao read auth/jwt-tenancy/role/see-env   # token_policies must allow auth/token/renew-self and the env's KV paths; token_ttl/token_max_ttl", ""},
	ReportPending: {KindTemporary, "tenancy did not acknowledge the report: it waits in the outbox (the box runs what it applied)",
		"monky-deployd status --json | jq '.last_report, .outbox'   # then tenancy's health", ""},
	OutboxStuck: {KindFinding, "the report outbox does not drain: tenancy has not acknowledged a report over several ticks",
		"monky-deployd explain -n 5   # the tick-end lines carry tenancy's answer to the report", ""},
	BaoUnavailable: {KindTemporary, "OpenBao answered 5xx (sealed, overloaded, or its storage down) or could not be reached; the step is kept and resumed",
		"curl -s $BAO_ADDR/v1/sys/health | jq '{sealed, standby}'   # from the box, through the same intercept", ""},
	TicksStopped: {KindFinding, "no tick has run for longer than stale_after_s: the timer is not running (stopped, disabled, or every start fails before the tick)",
		"systemctl status monky-deployd.timer   # disabled or inactive: systemctl enable --now monky-deployd.timer; journalctl -u monky-deployd -n 20", ""},
	Temporary: {KindTemporary, "a temporary fault (no code of its own)",
		"monky-deployd explain -n 5", ""},
	TickDeadline: {KindTemporary, "the tick ran past tick_timeout_s and stopped at a step boundary (committed, resumed next tick)",
		"monky-deployd explain -n 3   # the step durations show what was slow", ""},
	LocalFailure: {KindFailure, "the agent's own files failed it (state_dir, the token file, the lock file, deploy_dir or the state file): nothing was sent",
		"ls -la {state_dir} {deploy_dir}   # owner monky-deployd, not group- or world-writable, no symlink for bao.token, lock or state.db; then monky-deployd run --once (a bao.token removed as unusable is made again from a fresh bootstrap.jwt: re-run the install kit first)", ""},
	TokenExpired: {KindFinding, "the box's OpenBao token has expired: it was not renewed and no new lease replaced it",
		"monky-deployd status   # then: monky-deployd bootstrap --force with a fresh bootstrap.jwt from the install kit", ""},
	TokenExpiring: {KindFinding, "the box's OpenBao token is about to expire and is not being kept alive: renew-self no longer extends it (its max ttl) and no new lease replaced it",
		"monky-deployd explain -n 10 | grep -E 'renew|token-swap|lease'   # what the renewals and the swap answered", ""},
	LeaseEveryTick: {KindFinding, "the box asks tenancy for a lease at every tick: its token cannot be kept from one tick to the next (a max ttl under renew_below_s, or a token refused at every renewal)",
		"bao read auth/jwt-tenancy/role/see-env   # token_max_ttl must be well above bao.renew_below_s (default 6 h); then monky-deployd explain -n 5", ""},
	CheckinShape: {KindFailure, "tenancy's check-in answer has a shape the agent cannot trust (a sha that is not 64 lowercase hex, an unknown action, a vault.mount holding a control character or a byte outside ASCII)",
		"upgrade tenancy, or report the answer to its maintainers", ""},
	BundleNotFound: {KindFailure, "tenancy does not serve the bundle of the desired sha",
		"check the release in tenancy's console: the desired sha must have a rendered bundle", ""},
	StageFailed: {KindFailure, "the agent could not write the release directory or the registry credential",
		"ls -la {deploy_dir} {state_dir}/docker   # owner monky-deployd; and df -h", ""},
	BundleFetchFailed: {KindFailure, "tenancy refused to serve the desired sha's bundle (an answer that waiting does not change)",
		"check the release in tenancy's console and tenancy's log for GET /v1/agent/bundle/{env}/<sha>", ""},
	LeaseFailed: {KindFailure, "tenancy refused the lease (an answer other than 429 that waiting does not change)",
		"check the env's deploy grant in tenancy's console and tenancy's log for POST /v1/agent/lease", ""},
	KVNotFound: {KindFailure, "a secret the manifest names has no data in OpenBao at that path (or that version)",
		"bao kv metadata get -mount=<mount> <path>   # the entry's path (no value); then set the secret in OpenBao at that path", ""},
	KVVersionDeleted: {KindFailure, "the version of a secret the manifest pins is deleted or destroyed in OpenBao",
		"bao kv metadata get -mount=<mount> <path>   # its versions; undelete it, or publish the bundle with a live version", ""},
	KVKeyMissing: {KindFailure, "a secret the manifest names exists but lacks the key the entry reads (the evidence lists the keys it has)",
		"bao kv metadata get -mount=<mount> <path>   # then add the key to the secret in OpenBao, or fix the entry's key in the manifest", ""},
	BaoNotFound: {KindFailure, "OpenBao answered 404: the auth mount, the role or the KV mount the config names does not exist there",
		"grep -A6 '^bao:' {config}   # auth_mount, role, kv_mount must match OpenBao's", ""},
	BaoPath: {KindFailure, "a manifest entry's path is empty or not clean (`..`, `//`, a trailing `/`), so it was not read",
		"fix the entry's path in the bundle's secrets.manifest.json and publish the bundle", ""},
	BaoAnswer: {KindFailure, "OpenBao's answer was not one the agent can use: none, too large, not JSON, or not a KV-v2 secret (the path must be <mount>/data/…)",
		"curl -s $BAO_ADDR/v1/sys/health | jq   # from the box: is it OpenBao that answers (not a proxy's page)?", ""},
	BaoRequestRefused: {KindFailure, "OpenBao refused the request with an answer the agent has no other name for (the evidence holds OpenBao's words)",
		"read OpenBao's audit log for the box's token at that time", ""},
	CredentialShape: {KindFailure, "a credential is empty, too long or not printable ASCII (OpenBao's token, tenancy's login_jwt, or the stored token file: the evidence names which), so it was not used",
		"sudo wc -c {state_dir}/bao.token   # a stored token; for an answer: is it OpenBao or tenancy that answers, not a proxy's page?", ""},
	TenancyURL: {KindFailure, "tenancy's base URL, or a URL in tenancy's answer (bundle_url), is not one the agent may call",
		"grep -A4 '^tenancy:' {config}   # base_url; a bundle_url must stay on tenancy's host", ""},
	TLSCAFile: {KindFailure, "the CA file the config names is unreadable or holds no PEM certificate",
		"openssl x509 -noout -subject -in <ca_file>   # as the monky-deployd user: bao.ca_file / tenancy.ca_file", ""},
	NoMapping: {KindFailure, "the transport was asked for an address it maps to no intercept: only tenancy's and OpenBao's are",
		"grep -E 'addr|host|port|base_url' {config}   # bao.addr and tenancy's name must be the intercepts'", ""},
	TransportConfig: {KindFailure, "the transport's own settings are incomplete or wrong (proxy_addr for `proxy`, the identity for `sdk`)",
		"grep -E 'transport|proxy_addr|identity' {config}", ""},
	TransportUnknown: {KindFailure, "config.yaml names no transport, or one this build does not have",
		"monky-deployd version   # the transports built in; then set `transport:` to one of them", ""},
	DockerNotFound: {KindFailure, "the docker CLI (docker_bin) is not there, so compose could not run",
		"command -v docker && docker compose version   # or docker_bin in config.yaml", ""},
	DockerGroupMissing: {KindFailure, "docker's socket refuses the agent's user: it is not in the socket's group (docker), so no compose call can run; the tick stopped before checking in",
		"sudo usermod -aG docker monky-deployd   # the next tick runs with it (no docker group: install Docker Engine first)", ""},
	DockerInfoFailed: {KindFailure, "`docker info` failed: the engine is down or the agent's user may not use it",
		"systemctl status docker; id monky-deployd   # the user must be in the docker group", ""},
	ComposePSFailed: {KindFailure, "`docker compose ps` failed, so the agent could not see the project's containers",
		"sudo -u monky-deployd docker compose -p {project} ps", ""},
	ComposeLogsFailed: {KindFailure, "`docker compose logs` failed, so the report carries no log tail",
		"sudo -u monky-deployd docker compose -p {project} logs --tail 50", ""},
	ComposeDownFailed: {KindFailure, "`docker compose down` failed for tenancy's action down",
		"cd {deploy_dir}/current && docker compose -p {project} down   # then monky-deployd resume", ""},
	DockerPruneFailed: {KindFailure, "removing the images no kept release uses (`run --prune`) failed; the apply itself stands",
		"docker image ls --filter label=com.docker.compose.project={project}   # then docker image prune", ""},
}
