//go:build !ziti

package transport

import (
	"context"

	"github.com/tikali/monky-deployd/internal/vocab"
)

// newSDK in the default build: there is no OpenZiti SDK in it (the `sdk` Makefile target
// builds one with -tags ziti), so the sdk transport is refused with one line saying what to use.
func newSDK(Config) (Dialer, error) {
	return nil, &Error{Op: "transport sdk", Code: vocab.SDKUnavailable,
		Msg: "this build has no OpenZiti SDK; set `transport: proxy` (monky-deployd-proxy.service) or `transport: system`"}
}

// Enroll in the default build: enrolment is the SDK's, and this build has none.
func Enroll(context.Context, string) ([]byte, error) {
	return nil, &Error{Op: "enroll", Code: vocab.SDKUnavailable,
		Msg: "this build has no OpenZiti SDK: enrol with the sdk build (make sdk), or enrol the tunneller: ziti-edge-tunnel add --jwt FILE"}
}
