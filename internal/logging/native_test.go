package logging

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/coreos/go-systemd/v22/journal"
	"github.com/rs/zerolog/journald"
)

type sent struct {
	msg  string
	prio journal.Priority
	args map[string]string
}

// nativeJournal makes the journal's socket present and records what is sent to it; fail makes
// the socket refuse.
func nativeJournal(t *testing.T, fail bool) *[]sent {
	t.Helper()
	var got []sent
	oldEnabled, oldSend := journalEnabled, journald.SendFunc
	journalEnabled = func() bool { return true }
	journald.SendFunc = func(msg string, p journal.Priority, args map[string]string) error {
		if fail {
			return errors.New("no journal")
		}
		got = append(got, sent{msg, p, args})
		return nil
	}
	t.Cleanup(func() { journalEnabled, journald.SendFunc = oldEnabled, oldSend })
	return &got
}

// Natively, each entry goes to the journal with PRIORITY and its fields under upper-case names,
// so `journalctl CODE=…` and `-p err` select it; nothing is written to the stream, and a token's
// shape is masked in the message and every field.
func TestNativeJournalCarriesTheFields(t *testing.T) {
	got := nativeJournal(t, false)
	var stream bytes.Buffer
	l := Setup(&stream, "INFO", Options{Journald: true, Native: true}).With().Str(FieldEnv, "env-qa-02").Logger()
	l.Debug().Msg("hidden")
	l.Error().Uint64(FieldTick, 41).Int(FieldExit, 1).Str(FieldState, "Refused").Str(FieldCode, "ROLLBACK_REFUSED").
		Msg("exit 1: refused with token hvs.CAESIJabcdefghijklmnopqrstuv")
	if stream.Len() != 0 {
		t.Errorf("written to the stream too: %q", stream.String())
	}
	if len(*got) != 1 {
		t.Fatalf("%d entries sent, want 1: %+v", len(*got), *got)
	}
	e := (*got)[0]
	if e.prio != journal.PriErr || !strings.HasPrefix(e.msg, "exit 1: refused") {
		t.Errorf("entry %q at priority %d", e.msg, e.prio)
	}
	for k, v := range map[string]string{"CODE": "ROLLBACK_REFUSED", "ENV_ID": "env-qa-02", "TICK": "41", "STATE": "Refused", "EXIT": "1"} {
		if e.args[k] != v {
			t.Errorf("field %s = %q, want %q", k, e.args[k], v)
		}
	}
	for k, v := range e.args {
		if strings.Contains(v, "CAESIJ") {
			t.Errorf("field %s carries the token: %q", k, v)
		}
	}
	if strings.Contains(e.msg, "CAESIJ") {
		t.Errorf("message carries the token: %q", e.msg)
	}
}

// Without the journal's socket, or when it refuses an entry, the entry goes to the stream with
// its `<N>` prefix, once; and the stream stays the default without Native or the variable.
func TestNativeJournalFallsBackToTheStream(t *testing.T) {
	nativeJournal(t, true)
	var stream bytes.Buffer
	l := Setup(&stream, "INFO", Options{Journald: true, Native: true})
	l.Error().Str(FieldCode, "UNHEALTHY").Msg("exit 1")
	if stream.String() != "<3>exit 1 code=UNHEALTHY\n" {
		t.Errorf("stream %q", stream.String())
	}

	got := nativeJournal(t, false)
	stream.Reset()
	t.Setenv(EnvJournal, "")
	l = Setup(&stream, "INFO", Options{Journald: true})
	l.Warn().Msg("w")
	if stream.String() != "<4>w\n" || len(*got) != 0 {
		t.Errorf("the default is not the stream: %q, %d sent", stream.String(), len(*got))
	}
	t.Setenv(EnvJournal, "native")
	stream.Reset()
	l = Setup(&stream, "INFO", Options{Journald: true})
	l.Warn().Msg("w")
	if stream.Len() != 0 || len(*got) != 1 {
		t.Errorf("%s=native did not select the native protocol: %q, %d sent", EnvJournal, stream.String(), len(*got))
	}
	// on a terminal or through a pipe nothing changes
	stream.Reset()
	l = Setup(&stream, "INFO", Options{})
	l.Warn().Msg("w")
	if !strings.HasPrefix(stream.String(), `{"level":"warn"`) || len(*got) != 1 {
		t.Errorf("a pipe's output changed: %q", stream.String())
	}
}
