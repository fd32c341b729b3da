package logging

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/tikali/monky-deployd/internal/redact"
)

// In journald mode every line carries its syslog priority: each line of a multi-line message
// too, and nothing below the level is written.
func TestJournaldOutput(t *testing.T) {
	for _, c := range []struct {
		name, level string
		log         func(l zerolog.Logger)
		want        string
	}{
		{"priority prefixes", "debug", func(l zerolog.Logger) {
			l.Debug().Msg("d")
			l.Info().Str(FieldState, "Pulled").Int(FieldMs, 41).Msg("checkin: action=apply")
			l.Warn().Str(FieldDetail, "two words").Msg("w")
			l.Error().Err(errors.New("compose up: rc=1")).Str(FieldCode, "ENV_INCOMPLETE").Msg("refused")
		}, "<7>d\n" +
			"<6>checkin: action=apply state=Pulled ms=41\n" +
			"<4>w detail=\"two words\"\n" +
			"<3>refused error=\"compose up: rc=1\" code=ENV_INCOMPLETE\n"},
		{"multi-line message keeps its priority", "INFO", func(l zerolog.Logger) {
			l.Error().Msg("compose pull failed:\nline one\nline two")
		}, "<3>compose pull failed:\n<3>line one\n<3>line two\n"},
		{"level filter", "warn", func(l zerolog.Logger) {
			l.Info().Msg("hidden")
			l.Warn().Msg("shown")
		}, "<4>shown\n"},
	} {
		var buf bytes.Buffer
		c.log(Setup(&buf, c.level, Options{Journald: true}))
		if buf.String() != c.want {
			t.Errorf("%s: journald output:\n%s\nwant:\n%s", c.name, buf.String(), c.want)
		}
	}
}

func TestParseLevel(t *testing.T) {
	if ParseLevel("nonsense").String() != "info" || ParseLevel("Error").String() != "error" {
		t.Error("ParseLevel")
	}
}

func TestJSONLines(t *testing.T) {
	var buf bytes.Buffer
	l := Setup(&buf, "INFO", Options{})
	l.Info().Str(FieldSha, "7a10").Int64(FieldTick, 3).Msg("applied 7a10")
	var m map[string]any
	if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
		t.Fatalf("not one JSON line: %q: %v", buf.String(), err)
	}
	if m["message"] != "applied 7a10" || m["sha"] != "7a10" || m["level"] != "info" || m["time"] == nil {
		t.Errorf("fields: %v", m)
	}
}

func TestHumanNoColor(t *testing.T) {
	var buf bytes.Buffer
	l := Setup(&buf, "INFO", Options{Human: true, NoColor: true})
	l.Info().Str(FieldState, "Up").Msg("compose up")
	out := buf.String()
	if !strings.Contains(out, "compose up") || !strings.Contains(out, "state=Up") || strings.Contains(out, "\x1b[") {
		t.Fatalf("human output %q", out)
	}
	buf.Reset()
	t.Setenv("NO_COLOR", "")
	l = Setup(&buf, "INFO", Options{Human: true})
	l.Info().Msg("x")
	if !strings.Contains(buf.String(), "\x1b[") {
		t.Fatalf("colour expected without NO_COLOR: %q", buf.String())
	}
	buf.Reset()
	t.Setenv("NO_COLOR", "1")
	l = Setup(&buf, "INFO", Options{Human: true})
	l.Info().Msg("x")
	if strings.Contains(buf.String(), "\x1b[") {
		t.Fatalf("NO_COLOR ignored: %q", buf.String())
	}
}

// A value registered with redact.Default — even after Setup — never reaches any output.
func TestCanaryIsRedactedInEveryFormat(t *testing.T) {
	const canary = "canary-9f8e7d6c5b"
	for name, opts := range map[string]Options{
		"json": {}, "journald": {Journald: true}, "human": {Human: true, NoColor: true},
	} {
		var buf bytes.Buffer
		l := Setup(&buf, "DEBUG", opts)
		redact.Add(canary)
		l.Info().Str("value", canary).Msg("read " + canary)
		l.Warn().Msg("Authorization: Bearer never-registered-123 and hvs.ABCDEFGHijklmnop")
		out := buf.String()
		if strings.Contains(out, canary) || strings.Contains(out, "never-registered") || strings.Contains(out, "hvs.") {
			t.Errorf("%s: secret escaped: %q", name, out)
		}
		if strings.Count(out, redact.Mask) < 3 {
			t.Errorf("%s: masks missing: %q", name, out)
		}
	}
}

func TestDetect(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, _ := f.Stat()
	id, ok := devIno(fi)
	if !ok {
		t.Fatal("no dev:ino on this platform")
	}
	t.Setenv("JOURNAL_STREAM", id)
	if j, h := Detect(f); !j || h {
		t.Errorf("matching JOURNAL_STREAM: journald=%v human=%v", j, h)
	}
	t.Setenv("JOURNAL_STREAM", "1:2")
	if j, h := Detect(f); j || h {
		t.Errorf("foreign JOURNAL_STREAM on a file: journald=%v human=%v", j, h)
	}
	t.Setenv("JOURNAL_STREAM", "")
	if j, _ := Detect(f); j {
		t.Error("journald without JOURNAL_STREAM")
	}
	// A character device counts as a terminal.
	if null, err := os.Open(os.DevNull); err == nil {
		defer null.Close()
		if j, h := Detect(null); j || !h {
			t.Errorf("char device: journald=%v human=%v", j, h)
		}
	}
}

func TestPriority(t *testing.T) {
	for lvl, want := range map[string]int{"debug": 7, "info": 6, "warn": 4, "error": 3, "fatal": 2} {
		if got := Priority(lvl); got != want {
			t.Errorf("Priority(%q) = %d, want %d", lvl, got, want)
		}
	}
}
