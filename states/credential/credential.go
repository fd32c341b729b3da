// Package credential is the room of the box's credentials: the OpenBao token, the kit's
// bootstrap grant and a lease's grant. It holds what is decided about them, purely: whether a
// value is a credential at all (Check); how a tick gets its bearer from the disk (PlanStart)
// and what a refused grant login blocks on (GrantLoginFailed); when a held token is looked up,
// renewed or swapped (Unknown, RenewDue, SwapDue); what a call's refusal does to the token
// (BearerOf) and what a dropped token is and why (Dropped); whether a lease-derived token is
// reused (PlanReuse, PlanRenewed); whether a lease may be asked (LeaseGate, BudgetGate) and
// how long tenancy's 429 holds the next one (Throttled); how an apply gets its token
// (PlanApply); and what a grant's claims say. Every decision carries its typed cause (a
// vocab.Code and a vocab.Reason) from the effect that observed it.
//
// It makes no network or file call and reads no clock: the short act in states
// (credential.go, lease.go) reads and writes the files, calls tenancy and OpenBao and journals
// on its answers.
package credential

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/internal/vocab"
)

// MaxBytes bounds a token or grant the agent stores (OpenBao's tokens are under 200 bytes, a
// grant JWT under 2 KiB).
const MaxBytes = 8192

// Check refuses a token or grant that is not 1 to MaxBytes printable ASCII characters without
// spaces: such a value breaks every later request's header (a CR/LF in a token answer made
// every tick exit 1). The error is CREDENTIAL_SHAPE with reason, which says whose credential it
// was (vocab.ReasonShape the stored token, ReasonBaoAnswerShape OpenBao's login answer,
// ReasonLeaseShape tenancy's lease); the value itself is never in it.
func Check(op, what string, reason vocab.Reason, v string) error {
	msg := ""
	switch {
	case v == "":
		msg = what + " is empty"
	case len(v) > MaxBytes:
		msg = fmt.Sprintf("%s is %d bytes, more than %d", what, len(v), MaxBytes)
	default:
		for i := 0; i < len(v); i++ {
			if v[i] == ' ' {
				msg = fmt.Sprintf("%s holds a space (0x20 at offset %d): a credential has none", what, i)
				break
			}
			if v[i] < 0x21 || v[i] > 0x7e {
				msg = fmt.Sprintf("%s holds a byte that is not printable ASCII (%#02x at offset %d)", what, v[i], i)
				break
			}
		}
	}
	if msg == "" {
		return nil
	}
	return &effects.Error{Op: op, Kind: effects.Permanent, Code: vocab.CredentialShape, Reason: reason, Msg: msg + ": not stored"}
}

// Drop is what the agent journals when it drops the token, and the block it parks in when no
// fresh grant is on disk to log in again.
type Drop struct {
	Code   vocab.Code
	Reason vocab.Reason
	// Detail is the journal entry's words; Block the block's.
	Detail, Block string
}

// Dropped decides what a dropped token is from cause, the error that made the agent drop it:
// a token that is not a credential (never sent), OpenBao's refusal, or tenancy's 401.
func Dropped(cause error) Drop {
	switch c, r := effects.CodeOf(cause), effects.ReasonOf(cause); {
	case r == vocab.ReasonShape || c == vocab.CredentialShape:
		return Drop{Code: vocab.CredentialShape, Reason: vocab.ReasonShape,
			Detail: "the stored token is not a credential (" + Answer(cause) + "): token deleted; nothing was sent with it",
			Block:  "the stored token was not a credential and was deleted unsent, and no fresh bootstrap grant is on disk — re-run the install kit"}
	case strings.HasPrefix(string(c), "BAO_"):
		// OpenBao's refusal is OpenBao's, not tenancy's 401
		return Drop{Code: c, Reason: vocab.ReasonBaoRefused,
			Detail: "OpenBao refused the token (" + Answer(cause) + "): token deleted",
			Block:  "OpenBao refused the token (" + string(c) + "), and no fresh bootstrap grant is on disk — re-run the install kit"}
	}
	return Drop{Code: vocab.AgentUnauthenticated, Reason: vocab.ReasonTenancy401,
		Detail: "bearer refused by tenancy (" + Answer(cause) + "): token deleted",
		Block:  "the grant was superseded (kit re-revealed or env retired) or the token revoked, and no fresh bootstrap grant is on disk — re-run the install kit"}
}

// BlockCode is the code a block of reason is kept under: CREDENTIAL_SHAPE for a local shape
// fault, AGENT_UNAUTHENTICATED for every other way the box lost its token.
func BlockCode(r vocab.Reason) vocab.Code {
	if r == vocab.ReasonShape {
		return vocab.CredentialShape
	}
	return vocab.AgentUnauthenticated
}

// Answer is what the far side answered, once: the call, the HTTP status and its message,
// without the hint the error adds for a log line.
func Answer(err error) string {
	var e *effects.Error
	if !errors.As(err, &e) || e.Msg == "" {
		return err.Error()
	}
	w := e.Op
	if e.Status > 0 {
		w += fmt.Sprintf(" HTTP %d", e.Status)
	}
	return w + ": " + e.Msg
}

// Plan is how an apply gets its token: Stop (ask again next tick), Reuse the one held, take the
// KeptGrant (its JTI), or, none of them, ask a lease.
type Plan struct {
	Stop, Reuse, KeptGrant bool
	Detail, JTI            string
}

// PlanApply decides from whether the token held is reusable (why, or the error that left it
// unknown) and the grant kept from an interrupted tick ("" when none) at now.
func PlanApply(why string, reusable bool, reuseErr error, kept string, now time.Time) Plan {
	switch {
	case reuseErr != nil:
		return Plan{Stop: true}
	case reusable:
		return Plan{Reuse: true, Detail: why}
	case kept != "" && !GrantExpired(kept, now):
		return Plan{KeptGrant: true, JTI: GrantJTI(kept), Detail: "a lease's grant kept from an interrupted tick: no new lease"}
	}
	return Plan{}
}

// WholeToken accepts a token file as it is written: one line of printable ASCII ended by its
// newline. A torn write (no newline, or cut short by a power loss) is refused.
func WholeToken(b []byte) bool {
	if len(b) < 2 || len(b) > 16<<10 || b[len(b)-1] != '\n' {
		return false
	}
	for _, c := range b[:len(b)-1] {
		if c <= ' ' || c > '~' {
			return false
		}
	}
	return true
}

// WholeGrant accepts a kept grant file: a whole line holding a JWT whose claims decode.
func WholeGrant(b []byte) bool {
	var claims map[string]any
	return WholeToken(b) && claimsOf(string(b), &claims)
}

// GrantJTI reads a JWT's jti without verifying it; "" when it has none.
func GrantJTI(jwt string) string {
	var claims struct {
		JTI string `json:"jti"`
	}
	if !claimsOf(jwt, &claims) {
		return ""
	}
	return claims.JTI
}

// GrantExpired reads a JWT's exp without verifying it (OpenBao verifies); true when past.
func GrantExpired(jwt string, now time.Time) bool {
	var claims struct {
		Exp int64 `json:"exp"`
	}
	if !claimsOf(jwt, &claims) || claims.Exp == 0 {
		return false
	}
	return !now.Before(time.Unix(claims.Exp, 0))
}

// claimsOf decodes a JWT's payload into v without verifying it.
func claimsOf(jwt string, v any) bool {
	parts := strings.Split(strings.TrimSpace(jwt), ".")
	if len(parts) != 3 {
		return false
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	return err == nil && json.Unmarshal(raw, v) == nil
}
