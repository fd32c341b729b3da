//go:build ziti

package config

// SDKBuiltIn reports whether this build carries the OpenZiti SDK (the sdk transport).
const SDKBuiltIn = true
