package effects

import (
	"errors"
	"fmt"
	"testing"
)

func TestClassifiedChain(t *testing.T) {
	e := &Error{Op: "bao login", Kind: RateLimited, Status: 429, Code: "X", Msg: "slow down", Hint: "wait"}
	wrapped := fmt.Errorf("tick: %w", e)
	if KindOf(wrapped) != RateLimited || CodeOf(wrapped) != "X" || !IsTemporary(wrapped) {
		t.Fatalf("kind %v code %q", KindOf(wrapped), CodeOf(wrapped))
	}
	if got, want := e.Error(), "bao login: X (HTTP 429): slow down — wait"; got != want {
		t.Fatalf("%q, want %q", got, want)
	}
	plain := errors.New("plain")
	if KindOf(plain) != Permanent || CodeOf(plain) != "" || IsTemporary(plain) {
		t.Fatal("an unclassified error is Permanent with no code")
	}
	if (&Error{Op: "x", Err: plain}).Unwrap() != plain {
		t.Fatal("Unwrap lost the cause")
	}
}
