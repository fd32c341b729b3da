package states

import (
	"testing"
	"time"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/store"
)

// A container seen running a minute ago is restarted only when its Status says it has run for
// less than that at the longest; a Status without a duration (taken as long settled) never is.
func TestRestartsReadTheLongestUptime(t *testing.T) {
	seen := time.Date(2026, 12, 6, 3, 0, 0, 0, time.UTC)
	before := []store.Container{{Name: "p-api-1", Service: "api", State: "running", ID: "a1"}}
	for status, restarted := range map[string]bool{
		"Up 2 seconds":        true,
		"Up 56 seconds":       true,
		"Up 58 seconds":       false, // at most 59 s, within the slack of the minute
		"Up About a minute":   false,
		"Up 3 hours":          false,
		"Up":                  false, // says nothing of how long: settled
		"Up (healthy)":        false,
		"Up 5 fortnights ago": false,
	} {
		cs := []effects.Container{{Name: "p-api-1", Service: "api", State: "running", ID: "a1", Status: status}}
		if got := restarts(cs, before, seen, seen.Add(time.Minute))["a1"] != ""; got != restarted {
			t.Errorf("%q a minute after it was seen running: restarted %t, want %t", status, got, restarted)
		}
	}
	cs := []effects.Container{{Name: "p-api-1", Service: "api", State: "running", ID: "b2", Status: "Up 2 seconds"}}
	if r := restarts(cs, before, seen, seen.Add(time.Minute)); len(r) != 0 {
		t.Errorf("a new container (another ID) counted as a restart: %v", r)
	}
}
