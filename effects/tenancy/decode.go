package tenancy

import (
	"encoding/json"
	"fmt"
	"net/url"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/internal/bundle"
	"github.com/tikali/monky-deployd/internal/vocab"
)

func shapeErr(op string, code vocab.Code, msg string) error {
	return &effects.Error{Op: op, Kind: effects.Permanent, Code: code, Msg: msg}
}

// decodeCheckin reads a check-in answer tolerantly (unknown fields ignored) and refuses an
// action other than apply, none or down, an apply without a desired sha, and a desired sha
// that is not 64 lowercase hex characters (empty is accepted with none and down): all
// CHECKIN_SHAPE, whose detail never quotes the sha's bytes; so is a vault.mount holding a
// control character, a space or a byte outside ASCII. A missing bundle_url for apply is
// filled with /v1/agent/bundle/<env>/<sha>.
func decodeCheckin(body []byte) (effects.CheckinResponse, error) {
	var r effects.CheckinResponse
	if err := json.Unmarshal(body, &r); err != nil {
		return effects.CheckinResponse{}, shapeErr("checkin", vocab.CheckinShape, "answer is not a check-in: "+jsonProblem(err))
	}
	switch r.Action {
	case vocab.ActionApply, vocab.ActionNone, vocab.ActionDown:
	default:
		return effects.CheckinResponse{}, shapeErr("checkin", vocab.CheckinShape,
			fmt.Sprintf("unknown action %q (only apply, none and down exist)", clip(r.Action)))
	}
	if r.DesiredSha != "" && !bundle.ValidSha(r.DesiredSha) {
		return effects.CheckinResponse{}, shapeErr("checkin", vocab.CheckinShape,
			"desired_sha is not 64 lowercase hex characters ("+bundle.ShaProblem(r.DesiredSha)+")")
	}
	if r.Action == vocab.ActionApply {
		if r.DesiredSha == "" {
			return effects.CheckinResponse{}, shapeErr("checkin", vocab.CheckinShape, "action apply without a desired_sha")
		}
		if r.BundleURL == "" {
			r.BundleURL = "/v1/agent/bundle/" + url.PathEscape(r.EnvID) + "/" + url.PathEscape(r.DesiredSha)
		}
	}
	if r.CheckinIntervalS < 0 {
		r.CheckinIntervalS = 0
	}
	if r.Vault != nil {
		if why := mountProblem(r.Vault.Mount); why != "" {
			return effects.CheckinResponse{}, shapeErr("checkin", vocab.CheckinShape, "vault.mount is not a mount path ("+why+")")
		}
	}
	return r, nil
}

// mountProblem says what makes m unfit for a KV mount path, without quoting it: a control
// character, a space or a byte outside ASCII (U+202E would reorder a terminal's line), by
// kind and position; "" when m is empty or fit. The mount reaches the journal, the terminal
// and every manifest path's refusal.
func mountProblem(m string) string {
	for i := 0; i < len(m); i++ {
		switch c := m[i]; {
		case c < 0x20 || c == 0x7f:
			return fmt.Sprintf("a control character at byte %d", i)
		case c == ' ':
			return fmt.Sprintf("a space at byte %d", i)
		case c >= 0x80:
			return fmt.Sprintf("a non-ASCII byte at byte %d", i)
		}
	}
	return ""
}

// decodeLease reads AgentLeaseOut: addr top-level, else vault.addr. The AppRole shape
// (wrapping_token, role_id) and an answer without login_jwt are LEASE_SHAPE. The grant is
// never quoted.
func decodeLease(body []byte) (effects.Lease, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil {
		return effects.Lease{}, shapeErr("lease", vocab.LeaseShape, "answer is not a lease: "+jsonProblem(err))
	}
	for _, k := range []string{"wrapping_token", "role_id"} {
		if _, ok := raw[k]; ok {
			return effects.Lease{}, shapeErr("lease", vocab.LeaseShape,
				"tenancy answered the retired AppRole lease shape ("+k+"): AppRole is gone and there is nothing to unwrap — "+
					"tenancy must answer with login_jwt (AgentLeaseOut); no fallback")
		}
	}
	var l struct {
		effects.Lease
		Vault *struct {
			Addr string `json:"addr"`
		} `json:"vault"`
	}
	if err := json.Unmarshal(body, &l); err != nil {
		return effects.Lease{}, shapeErr("lease", vocab.LeaseShape, "answer is not a lease: "+jsonProblem(err))
	}
	out := l.Lease
	if out.Addr == "" && l.Vault != nil {
		out.Addr = l.Vault.Addr
	}
	if out.LoginJWT == "" {
		return effects.Lease{}, shapeErr("lease", vocab.LeaseShape, "lease answer has no login_jwt")
	}
	return out, nil
}

// jsonProblem describes a decode error without quoting the input.
func jsonProblem(err error) string {
	switch e := err.(type) {
	case *json.SyntaxError:
		return fmt.Sprintf("invalid JSON at byte %d", e.Offset)
	case *json.UnmarshalTypeError:
		return fmt.Sprintf("field %q is a JSON %s", e.Field, e.Value)
	}
	return "not a JSON object"
}
