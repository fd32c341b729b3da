// Package logging builds the agent's zerolog logger: `<N>`-prefixed lines under journald (so
// `journalctl -p` works), zerolog's console format on a terminal, JSON lines otherwise. Every
// output passes through redact.Default.
//
// It may not write anywhere but the writer it is given, and it holds no logger of its own: the
// caller passes the logger it gets from Setup.
package logging

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-systemd/v22/journal"
	"github.com/rs/zerolog"
	"github.com/rs/zerolog/journald"

	"github.com/tikali/monky-deployd/internal/redact"
)

// Field names used across the agent, so `journalctl`, `explain` and dashboards agree.
const (
	FieldEnv      = "env_id"
	FieldTick     = "tick"
	FieldState    = "state"
	FieldFrom     = "from"
	FieldTo       = "to"
	FieldEvent    = "event"
	FieldAction   = "action"
	FieldSha      = "sha"
	FieldDesired  = "desired"
	FieldApplied  = "applied"
	FieldCode     = "code"
	FieldDetail   = "detail"
	FieldMs       = "ms"
	FieldExit     = "exit"
	FieldAttempt  = "attempt"
	FieldRetryAt  = "retry_at"
	FieldNext     = "next"
	FieldOp       = "op"
	FieldStatus   = "status"
	FieldPath     = "path"
	FieldName     = "name" // a secret's or service's name — never its value
	FieldCount    = "count"
	FieldTokenTTL = "token_ttl_s"
)

// Options forces an output format; the zero value means JSON lines.
type Options struct {
	Journald bool // `<N>` priority prefix + message + key=value; wins over Human
	// Native, with Journald, sends each entry to the journal's own socket (zerolog's journald
	// writer) with PRIORITY and every field as a journal field (CODE, ENV_ID, TICK, STATE,
	// EXIT, …) instead of the `<N>` stream; also when $MONKY_DEPLOYD_JOURNAL is "native". An
	// entry the socket does not take goes to the stream, prefixed.
	Native  bool
	Human   bool // zerolog's ConsoleWriter
	NoColor bool // no ANSI colours in Human (also when NO_COLOR is set)
}

// EnvJournal selects how the agent writes to the journal under systemd: "native" (fields) or
// "stream" (the default: `<N>`-prefixed lines on stderr; docs/OPERATIONS.md says why).
const EnvJournal = "MONKY_DEPLOYD_JOURNAL"

// Setup returns a logger writing to w at level (DEBUG|INFO|WARN|ERROR, any case; anything else is
// INFO — config has refused it already). Every line is redacted by redact.Default before it
// reaches w, including values registered after Setup.
func Setup(w io.Writer, level string, opts Options) zerolog.Logger {
	sink := redact.Default.Writer(w)
	var out io.Writer
	switch {
	case opts.Journald && (opts.Native || os.Getenv(EnvJournal) == "native") && journalEnabled():
		out = redact.Default.Writer(&nativeWriter{stream: &journalWriter{w: sink}})
	case opts.Journald:
		out = &journalWriter{w: sink}
	case opts.Human:
		noColor := opts.NoColor || os.Getenv("NO_COLOR") != "" // no-color.org: set and non-empty
		out = zerolog.ConsoleWriter{Out: sink, NoColor: noColor, TimeFormat: time.DateTime}
	default:
		out = sink
	}
	l := zerolog.New(out).Level(ParseLevel(level))
	if !opts.Journald {
		l = l.With().Timestamp().Logger() // journald stamps lines itself
	}
	return l
}

// ParseLevel maps DEBUG|INFO|WARN|ERROR (any case) to zerolog; anything else is INFO.
func ParseLevel(level string) zerolog.Level {
	switch strings.ToUpper(strings.TrimSpace(level)) {
	case "DEBUG":
		return zerolog.DebugLevel
	case "WARN", "WARNING":
		return zerolog.WarnLevel
	case "ERROR":
		return zerolog.ErrorLevel
	}
	return zerolog.InfoLevel
}

// Detect says how stderr should be written: journald when JOURNAL_STREAM names stderr's own
// device and inode (systemd sets it for the unit's stdout/stderr stream), human when stderr is a
// terminal. At most one is true.
func Detect(stderr *os.File) (journald, human bool) {
	if stderr == nil {
		return false, false
	}
	fi, err := stderr.Stat()
	if err != nil {
		return false, false
	}
	if js := os.Getenv("JOURNAL_STREAM"); js != "" {
		if id, ok := devIno(fi); ok && id == js {
			return true, false
		}
	}
	return false, fi.Mode()&os.ModeCharDevice != 0
}

// Priority is the syslog priority of a zerolog level name, as journald reads it from `<N>`.
func Priority(level string) int {
	switch level {
	case "trace", "debug":
		return 7
	case "info", "":
		return 6
	case "warn":
		return 4
	case "error":
		return 3
	case "fatal":
		return 2
	case "panic":
		return 0
	}
	return 5
}

// journalWriter turns zerolog's JSON lines into `<N>message key=value …` lines.
type journalWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (j *journalWriter) Write(p []byte) (int, error) {
	line, err := journalLine(p)
	if err != nil {
		// Not a zerolog event: pass it on, still one prefixed line per input line.
		line = []byte("<6>" + strings.ReplaceAll(strings.TrimRight(string(p), "\n"), "\n", "\n<6>") + "\n")
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if _, err := j.w.Write(line); err != nil {
		return 0, err
	}
	return len(p), nil
}

func journalLine(p []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(p))
	dec.UseNumber()
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, fmt.Errorf("not a json object")
	}
	var level, msg string
	var fields bytes.Buffer
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, _ := kt.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, err
		}
		switch key {
		case zerolog.LevelFieldName:
			_ = json.Unmarshal(raw, &level)
			continue
		case zerolog.MessageFieldName:
			_ = json.Unmarshal(raw, &msg)
			continue
		case zerolog.TimestampFieldName:
			continue
		}
		fields.WriteByte(' ')
		fields.WriteString(key)
		fields.WriteByte('=')
		fields.WriteString(fieldValue(raw))
	}
	prefix := "<" + strconv.Itoa(Priority(level)) + ">"
	var b bytes.Buffer
	// A multi-line message (a compose log tail) keeps its priority on every line.
	lines := strings.Split(strings.TrimRight(msg, "\n"), "\n")
	for i, l := range lines {
		b.WriteString(prefix)
		b.WriteString(l)
		if i == 0 {
			f := fields.Bytes()
			if l == "" {
				f = bytes.TrimPrefix(f, []byte(" "))
			}
			b.Write(f)
		}
		b.WriteByte('\n')
	}
	return b.Bytes(), nil
}

// fieldValue renders a JSON value as key=value text: bare when it is one plain word, quoted
// otherwise; objects and arrays stay compact JSON.
func fieldValue(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			if s != "" && !strings.ContainsAny(s, " \t\r\n\"=\\") {
				return s
			}
			return strconv.Quote(s)
		}
	}
	var c bytes.Buffer
	if json.Compact(&c, raw) == nil {
		return c.String()
	}
	return string(raw)
}

// nativeWriter sends each zerolog event, already redacted, to the journal's socket through
// zerolog's own journald writer: the message, PRIORITY from the level, and every field under
// its upper-case name (env_id → ENV_ID). An event the socket refuses is written to the stream
// instead, so no line is lost and none is written twice.
type nativeWriter struct {
	stream io.Writer
}

var nativeSink = journald.NewJournalDWriter()

// journalEnabled reports whether the journal's socket is there (a test may replace it).
var journalEnabled = journal.Enabled

func (n *nativeWriter) Write(p []byte) (int, error) {
	if _, err := nativeSink.Write(p); err == nil {
		return len(p), nil
	}
	return n.stream.Write(p)
}
