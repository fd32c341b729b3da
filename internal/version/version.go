// Package version holds the agent's version, set at build time from the repo's VERSION file:
// go build -ldflags "-X github.com/tikali/monky-deployd/internal/version.Version=$(cat VERSION)".
package version

// Version is what `monky-deployd version` prints and what check-ins and reports carry.
var Version = "dev"
