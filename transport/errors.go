package transport

import "github.com/tikali/monky-deployd/internal/vocab"

// Error is a fault the transport decides itself, before or instead of a socket: no usable
// transport in the config, an unusable identity, an address outside the mapping, a CA file
// that holds no certificate. Code is the word explain knows it by. The transport does not
// classify: effects.Classify turns an Error in a call's chain into the agent's classified
// error (Kind TLS when TLS is set, else Permanent).
type Error struct {
	Op   string     // "transport", "transport proxy", "transport sdk", "tls"
	Code vocab.Code // TRANSPORT_UNKNOWN, TRANSPORT_CONFIG, NO_MAPPING, IDENTITY_UNUSABLE, SDK_UNAVAILABLE, TLS_CA_FILE
	Msg  string     // what is wrong; never a secret
	Hint string     // what to check, for a person
	TLS  bool       // a fault of the TLS setup: retrying cannot fix it
	Err  error      // the cause
}

func (e *Error) Error() string {
	return vocab.ErrorText(e.Op, e.Code, 0, e.Msg, e.Err, e.Hint)
}

func (e *Error) Unwrap() error { return e.Err }
