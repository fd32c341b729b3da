package bundle

import "github.com/tikali/monky-deployd/internal/vocab"

// The refusal codes are the vocabulary's (vocab.BundleInvalid … vocab.DiskInsufficient). The
// first six are decided in this package; ROLLBACK_REFUSED and DISK_INSUFFICIENT need the agent's
// history and the box's disks, so the caller decides them. PROTOCOL.md §2 fixes their order: a
// bundle wrong in two ways is refused with the earlier code.

// Refusal is a bundle refused before any lease. Detail names files, variables, paths and
// services — never a value.
type Refusal struct {
	Code vocab.Code
	// Reason is the typed cause behind Code, when the code does not say all
	// (vocab.ReasonUnlistedField for a PRIVILEGED_REFUSED of unlisted fields only).
	Reason vocab.Reason
	Detail string
}

func (r *Refusal) Error() string {
	if r.Detail == "" {
		return string(r.Code)
	}
	return string(r.Code) + ": " + r.Detail
}

func Invalid(format string, args ...any) *Refusal {
	return &Refusal{Code: vocab.BundleInvalid, Detail: sprintf(format, args...)}
}
