package bundle

// Refusal codes. The first six are decided in this package; ROLLBACK_REFUSED and
// DISK_INSUFFICIENT need the agent's history and the box's disks, so the caller decides them.
// PROTOCOL.md §2 fixes their order: a bundle wrong in two ways is refused with the earlier code.
const (
	CodeInvalid          = "BUNDLE_INVALID"
	CodeShaMismatch      = "BUNDLE_SHA_MISMATCH"
	CodeEnvMismatch      = "BUNDLE_ENV_MISMATCH"
	CodeEnvIncomplete    = "ENV_INCOMPLETE"
	CodeManifestPath     = "MANIFEST_PATH_REFUSED"
	CodePrivileged       = "PRIVILEGED_REFUSED"
	CodeRollback         = "ROLLBACK_REFUSED"
	CodeDiskInsufficient = "DISK_INSUFFICIENT"
)

// Refusal is a bundle refused before any lease. Detail names files, variables, paths and
// services — never a value.
type Refusal struct {
	Code   string
	Detail string
}

func (r *Refusal) Error() string {
	if r.Detail == "" {
		return r.Code
	}
	return r.Code + ": " + r.Detail
}

func invalid(format string, args ...any) *Refusal {
	return &Refusal{Code: CodeInvalid, Detail: sprintf(format, args...)}
}
