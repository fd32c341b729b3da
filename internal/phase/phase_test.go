package phase

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
	"time"
)

// With MONKY_DEPLOYD_TRACE set, every mark is printed in order, the "start" phase measured from
// the time the variable gives; with 1 it is zero; unset, nothing is printed.
func TestPhases(t *testing.T) {
	t.Setenv("MONKY_DEPLOYD_TRACE", strconv.FormatInt(time.Now().Add(-50*time.Millisecond).UnixNano(), 10))
	Begin()
	Mark("config")
	Mark("exit")
	var out bytes.Buffer
	Print(&out)
	var names []string
	var startNs int64
	for _, l := range strings.Split(out.String(), "\n") {
		f := strings.Fields(l)
		if len(f) == 4 && f[0] == "phase" {
			names = append(names, f[1])
			if f[1] == "start" {
				startNs, _ = strconv.ParseInt(f[3], 10, 64)
			}
		}
	}
	if strings.Join(names, " ") != "start config exit" || startNs < int64(50*time.Millisecond) {
		t.Fatalf("phases %v, start %d ns:\n%s", names, startNs, out.String())
	}

	t.Setenv("MONKY_DEPLOYD_TRACE", "1")
	Begin()
	out.Reset()
	Print(&out)
	if !strings.HasPrefix(out.String(), "phase start ") || !strings.Contains(out.String(), " 0\n") {
		t.Fatalf("MONKY_DEPLOYD_TRACE=1: %q", out.String())
	}

	t.Setenv("MONKY_DEPLOYD_TRACE", "")
	Begin()
	Mark("config")
	out.Reset()
	Print(&out)
	if out.Len() != 0 {
		t.Fatalf("unset, it printed %q", out.String())
	}
}
