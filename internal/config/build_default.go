//go:build !ziti

package config

// SDKBuiltIn reports whether this build carries the OpenZiti SDK (the sdk transport). The
// default build does not: `make sdk` builds one with -tags ziti.
const SDKBuiltIn = false
