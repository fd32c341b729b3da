package effects

// The agent's classified error: what failed (Op), how (Kind), the far side's code and words, and
// what to check. Every effect returns one for a failure it has classified; Classify turns what
// the transport and the network return into one.

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"
	"time"

	"github.com/tikali/monky-deployd/internal/vocab"
	"github.com/tikali/monky-deployd/store"
)

// Kind classifies an effect's failure; the exit code is derived from it in one place (cmd).
type Kind int

const (
	// Permanent: a failure of this attempt (exit 1).
	Permanent Kind = iota
	// Temporary: mesh down, unreachable, 5xx, timeout, 429 (exit 75); the next tick retries.
	Temporary
	// Unauthenticated: 401 AGENT_UNAUTHENTICATED — the bearer was refused.
	Unauthenticated
	// EnvMismatch: 403 AGENT_ENV_MISMATCH — the token is pinned to another env (exit 78).
	EnvMismatch
	// RateLimited: 429 — temporary, with RetryAfter when tenancy gave one.
	RateLimited
	// NotFound: 404 — the named bundle or secret does not exist.
	NotFound
	// TLS: certificate verification failed — retrying cannot fix a wrong CA (exit 1).
	TLS
)

func (k Kind) String() string {
	switch k {
	case Permanent:
		return "permanent"
	case Temporary:
		return "temporary"
	case Unauthenticated:
		return "unauthenticated"
	case EnvMismatch:
		return "env-mismatch"
	case RateLimited:
		return "rate-limited"
	case NotFound:
		return "not-found"
	case TLS:
		return "tls"
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// Error is the typed error every effect returns for a failure it has classified.
type Error struct {
	Op         string        // "checkin", "lease", "login", "compose pull", …
	Kind       Kind          //
	Status     int           // HTTP status, 0 when none
	Code       vocab.Code    // the agent's code, or the far side's (tenancy's, OpenBao's) as it answered
	Reason     vocab.Reason  // who observed what (tenancy's 401, a local shape fault, …); "" when the code says all
	Msg        string        // the far side's own words, redacted; never a secret
	Hint       string        // what to check, for a person
	RetryAfter time.Duration // 429's Retry-After, 0 when absent
	Err        error         // the cause
}

func (e *Error) Error() string {
	return vocab.ErrorText(e.Op, e.Code, e.Status, e.Msg, e.Err, e.Hint)
}

func (e *Error) Unwrap() error { return e.Err }

// KindOf returns the Kind of the first *Error in err's chain; the state file held by another
// process past the wait (store.ErrLocked) is Temporary; another unclassified error is Permanent.
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	if errors.Is(err, store.ErrLocked) {
		return Temporary
	}
	return Permanent
}

// CodeOf returns the Code of the first *Error in err's chain, "" when none.
//
// An error of the agent's own writes that no retry of the write can mend — no space, over quota,
// a read-only file system — is STATE_UNWRITABLE (Unwritable), whatever step met it.
func CodeOf(err error) vocab.Code {
	var e *Error
	if errors.As(err, &e) && e.Code != "" {
		return e.Code
	}
	if _, ok := Unwritable(err); ok {
		return vocab.StateUnwritable
	}
	return ""
}

// Unwritable reports whether err is a write of the agent's own files refused for want of room or
// a writable file system (ENOSPC, EDQUOT, EROFS), with the words that name the file and the cause.
func Unwritable(err error) (string, bool) {
	var cause string
	switch {
	case errors.Is(err, syscall.ENOSPC):
		cause = "no space left on the device"
	case errors.Is(err, syscall.EDQUOT):
		cause = "the disk quota is exceeded"
	case errors.Is(err, syscall.EROFS):
		cause = "the file system is mounted read-only"
	default:
		return "", false
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Path + ": " + cause, true
	}
	return cause, true
}

// ReasonOf returns the Reason of the first *Error in err's chain that has one, "" when none.
func ReasonOf(err error) vocab.Reason {
	for err != nil {
		var e *Error
		if !errors.As(err, &e) {
			return ""
		}
		if e.Reason != "" {
			return e.Reason
		}
		err = e.Err
	}
	return ""
}

// IsTemporary reports whether the next tick may succeed by itself (exit 75).
func IsTemporary(err error) bool {
	k := KindOf(err)
	return k == Temporary || k == RateLimited
}
