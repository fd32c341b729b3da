package main

import (
	"runtime/debug"
	"slices"
	"strings"

	"github.com/tikali/monky-deployd/internal/config"
)

// transportsBuiltIn are the transports this build can dial with, for the build_info metric:
// proxy and system always, sdk in a build with -tags ziti. Read from the binary's build
// settings when a tick writes its metrics, never at start.
func transportsBuiltIn() []string {
	ts := []string{config.TransportProxy, config.TransportSystem}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "-tags" && slices.Contains(strings.Split(s.Value, ","), "ziti") {
				return append([]string{config.TransportSDK}, ts...)
			}
		}
	}
	return ts
}
