package effects

import "github.com/tikali/monky-deployd/effects/fault"

// Error is the typed error every effect returns for a failure it has classified (fault.Error).
type Error = fault.Error

// Kind classifies an effect's failure (fault.Kind).
type Kind = fault.Kind

// The kinds of fault.Kind, under the names the agent's callers use.
const (
	Permanent       = fault.Permanent
	Temporary       = fault.Temporary
	Unauthenticated = fault.Unauthenticated
	EnvMismatch     = fault.EnvMismatch
	RateLimited     = fault.RateLimited
	NotFound        = fault.NotFound
	TLS             = fault.TLS
)

// KindOf returns the Kind of the first *Error in err's chain; an unclassified error is Permanent.
func KindOf(err error) Kind { return fault.KindOf(err) }

// CodeOf returns the Code of the first *Error in err's chain, "" when none.
func CodeOf(err error) string { return fault.CodeOf(err) }

// IsTemporary reports whether the next tick may succeed by itself (exit 75).
func IsTemporary(err error) bool { return fault.IsTemporary(err) }
