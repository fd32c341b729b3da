package vocab

// Reason is the typed cause behind a code: which effect observed the fault, and what it saw.
// A code says what failed (AGENT_UNAUTHENTICATED); its reason says who decided it (tenancy's
// 401, OpenBao's refusal, a grant the agent cannot read, none on disk). The effect that
// observed the fault sets it; the journal entry, the block, the failure and the refusal keep
// it; explain, status, the report's why and the metrics switch on it and never on words. ""
// is a record written before reasons were kept: it reads with its code's own words.
type Reason string

// Every reason, once. The spelling is stored in state files: it never changes.
const (
	// ReasonTenancy401: tenancy answered 401 to a call that carried the token.
	ReasonTenancy401 Reason = "tenancy-401"
	// ReasonTenancy403: tenancy answered 403 (the token's env is not the config's).
	ReasonTenancy403 Reason = "tenancy-403"
	// ReasonBaoRefused: OpenBao refused the token (its code is the entry's).
	ReasonBaoRefused Reason = "bao-refused"
	// ReasonGrantRefused: OpenBao refused the bootstrap grant at the login.
	ReasonGrantRefused Reason = "grant-refused"
	// ReasonShape: a credential held locally is not a credential (empty, too long, a byte
	// that is not printable ASCII); it was dropped with no request sent.
	ReasonShape Reason = "local-shape"
	// ReasonGrantUnreadable: no token, and the agent's user cannot read the grant on disk.
	ReasonGrantUnreadable Reason = "grant-unreadable"
	// ReasonGrantAbsent: no token and no grant on disk; nothing was sent.
	ReasonGrantAbsent Reason = "grant-absent"
	// ReasonRegistryDenied: the registry refused the pull for its credential.
	ReasonRegistryDenied Reason = "registry-denied"
	// ReasonImageMissing: the registry does not hold an image or tag the bundle names.
	ReasonImageMissing Reason = "image-missing"
	// ReasonRegistryDNS: the registry's name does not resolve on this box.
	ReasonRegistryDNS Reason = "registry-dns"
	// ReasonNetwork: the far side could not be reached or did not answer in time.
	ReasonNetwork Reason = "network"
	// ReasonReuseUnasked: OpenBao could not be asked whether the token in hand still reads
	// the secrets, so no lease was asked on a guess.
	ReasonReuseUnasked Reason = "reuse-unasked"
	// ReasonAgentWait: the agent's own wait for a Retry-After tenancy gave earlier; no
	// request was sent.
	ReasonAgentWait Reason = "agent-wait"
	// ReasonPSFailed: the heartbeat's compose ps failed, so whether the services run is not
	// known.
	ReasonPSFailed Reason = "ps-failed"
	// ReasonUnlistedField: the privileged policy refused only fields its allowlist does not
	// name — refused because no one has listed them, not because they were found to give
	// power over the host.
	ReasonUnlistedField Reason = "unlisted-field"
	// ReasonExited: the health gate found a service exited that its restart policy ("no")
	// never starts again, and failed at that look instead of waiting out healthy_timeout_s.
	ReasonExited Reason = "exited"
	// ReasonComposeMissing: the docker CLI (docker_bin) is there, but `docker compose version`
	// found no compose v2 plugin (none, or compose v1 alone): DOCKER_NOT_FOUND of compose, not
	// of the CLI.
	ReasonComposeMissing Reason = "compose-missing"
	// ReasonTenancy5xx: tenancy answered, with a server error of its own (5xx, its code in the
	// body; a bare 5xx may be a proxy's on the way and carries no reason): the box reached
	// it (its mesh, identity and bearer are not what failed); tenancy, or what it depends on,
	// could not serve the call now.
	ReasonTenancy5xx Reason = "tenancy-5xx"
	// ReasonBaoAnswerShape: OpenBao's login answered a token that is not a credential (empty,
	// too long, a byte that is not printable ASCII); it was not stored.
	ReasonBaoAnswerShape Reason = "bao-answer-shape"
	// ReasonLeaseShape: tenancy's lease held a login_jwt that is not a credential; it was not
	// sent to OpenBao.
	ReasonLeaseShape Reason = "lease-shape"

	// What the agent's trust check found at one of its own files or directories (a
	// LOCAL_FAILURE; the entry's subject names the path). Each is one way of mending it, which
	// files.TrustFix prints.

	// ReasonTrustLink: a symlink where the agent's file or directory must be.
	ReasonTrustLink Reason = "trust-link"
	// ReasonTrustType: something other than a directory where one must be, or a FIFO, device
	// or socket where a regular file must be; removed, the agent creates it again.
	ReasonTrustType Reason = "trust-type"
	// ReasonTrustTree: a directory where a regular file must be.
	ReasonTrustTree Reason = "trust-tree"
	// ReasonTrustOwner: owned by another user than the one the agent runs as.
	ReasonTrustOwner Reason = "trust-owner"
	// ReasonTrustMode: group- or world-writable.
	ReasonTrustMode Reason = "trust-mode"
)

// reasons are the known reasons, with whether a retry can change what they observed.
var reasons = map[Reason]bool{
	ReasonTenancy401: false, ReasonTenancy403: false, ReasonBaoRefused: false, ReasonGrantRefused: false,
	ReasonShape: false, ReasonGrantUnreadable: false, ReasonGrantAbsent: false,
	ReasonRegistryDenied: false, ReasonImageMissing: false, ReasonRegistryDNS: true, ReasonNetwork: true,
	ReasonReuseUnasked: true, ReasonAgentWait: true, ReasonPSFailed: true, ReasonUnlistedField: false,
	ReasonExited: true, ReasonComposeMissing: false, ReasonTenancy5xx: true,
	ReasonBaoAnswerShape: false, ReasonLeaseShape: false,
	ReasonTrustLink: false, ReasonTrustType: false, ReasonTrustTree: false, ReasonTrustOwner: false, ReasonTrustMode: false,
}

// KnownReason reports whether r is a reason this agent writes ("" is not).
func KnownReason(r Reason) bool {
	_, ok := reasons[r]
	return ok
}

// Hopeless reports whether no retry can change what r observed: the same request gets the
// same answer until a person acts (the registry refusing the credential, an image that does
// not exist). A failure of such a reason needs a person at once.
func (r Reason) Hopeless() bool {
	retry, ok := reasons[r]
	return ok && !retry
}
