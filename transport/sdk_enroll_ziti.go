//go:build ziti

package transport

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/openziti/sdk-golang/ziti"
	"github.com/openziti/sdk-golang/ziti/enroll"
	"github.com/sirupsen/logrus"
)

// Enroll enrols the box's identity with the SDK's own enrolment from token, a one-time (ott)
// enrolment JWT: it fetches the controller's CAs, generates the key, has the controller sign its
// certificate, and returns the identity file's JSON (as `ziti edge enroll` writes it). Every
// call to the controller runs under ctx: when ctx ends first, Enroll returns its error and the
// abandoned enrolment's result is dropped. Its words never quote the token or the key.
func Enroll(ctx context.Context, token string) ([]byte, error) {
	type result struct {
		out []byte
		err error
	}
	ch := make(chan result, 1)
	go func() {
		var r result
		defer func() { ch <- r }()
		defer recoverSDK("enrolling", &r.err)
		r.out, r.err = enrollToken(token)
	}()
	select {
	case r := <-ch:
		return r.out, r.err
	case <-ctx.Done():
		return nil, fmt.Errorf("enrolment: the controller did not answer in time: %w", ctx.Err())
	}
}

func enrollToken(token string) ([]byte, error) {
	logrus.SetOutput(io.Discard) // the SDK's log lines are not ours to print: its faults come back as errors
	claims, jwtToken, err := enroll.ParseToken(strings.TrimSpace(token))
	if err != nil {
		return nil, fmt.Errorf("the enrolment JWT is not one this controller signed, or its controller does not answer: %s", sdkWords(err))
	}
	if claims.EnrollmentMethod != "ott" {
		return nil, fmt.Errorf("the enrolment JWT's method is %q: enroll takes a one-time-token (ott) JWT, as `ziti edge create identity -o FILE` writes", claims.EnrollmentMethod)
	}
	flags := enroll.EnrollmentFlags{Token: claims, JwtToken: jwtToken, JwtString: token, KeyAlg: ziti.KeyAlgVar("EC")}
	cfg, err := enroll.Enroll(flags)
	if err != nil {
		return nil, errors.New("the controller refused the enrolment: " + sdkWords(err))
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(cfg); err != nil {
		return nil, fmt.Errorf("enrolment: the identity does not encode: %s", sdkWords(err))
	}
	return buf.Bytes(), nil
}
