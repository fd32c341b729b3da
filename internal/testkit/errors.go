package testkit

import (
	"errors"
	"testing"
)

// ErrorAs is errors.As for a test: the error of type E in err's chain, or a failed test.
func ErrorAs[E error](tb testing.TB, err error) E {
	tb.Helper()
	var e E
	if !errors.As(err, &e) {
		tb.Fatalf("error %v (%T) is not a %T", err, err, e)
	}
	return e
}
