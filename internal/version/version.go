// Package version holds the agent's version, set at build time from the repo's VERSION file:
// go build -ldflags "-X github.com/tikali/monky-deployd/internal/version.Version=$(cat VERSION)
// -X github.com/tikali/monky-deployd/internal/version.Commit=$(git rev-parse --short=12 HEAD)".
package version

import (
	"runtime"
	"runtime/debug"

	"github.com/tikali/monky-deployd/internal/config"
)

// Version is what `monky-deployd version` prints and what check-ins and reports carry.
var Version = "dev"

// Commit is the source commit the binary was built from; when the build did not set it, the
// commit Go recorded in the binary (a build from a git checkout), else "unknown".
var Commit = ""

// Info is what `monky-deployd version` prints.
type Info struct {
	Version string `json:"version"`
	Commit  string `json:"commit"`
	Go      string `json:"go"`
	// Transports are the transports this build can dial with; DefaultTransport is the one a
	// config that names none gets.
	Transports       []string `json:"transports"`
	DefaultTransport string   `json:"default_transport"`
}

// Get describes this binary.
func Get() Info {
	return Info{
		Version:          Version,
		Commit:           commit(),
		Go:               runtime.Version(),
		Transports:       config.BuiltInTransports(),
		DefaultTransport: config.DefaultTransport(),
	}
}

func commit() string {
	if Commit != "" {
		return Commit
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		rev, dirty := "", false
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if rev != "" && dirty {
			rev += "-dirty"
		}
		if rev != "" {
			return rev
		}
	}
	return "unknown"
}
