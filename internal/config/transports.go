package config

// DefaultTransport is the transport a config that names none gets: sdk in a build with the
// OpenZiti SDK, system (the tunneller intercepts) in one without it, so that the default
// install works with the package as it is built.
func DefaultTransport() string {
	if SDKBuiltIn {
		return TransportSDK
	}
	return TransportSystem
}

// BuiltInTransports are the transports this build can dial with, in the order `version`
// prints them.
func BuiltInTransports() []string {
	if SDKBuiltIn {
		return []string{TransportSDK, TransportProxy, TransportSystem}
	}
	return []string{TransportProxy, TransportSystem}
}

// TransportBuiltIn reports whether this build can dial with transport t.
func TransportBuiltIn(t string) bool {
	for _, b := range BuiltInTransports() {
		if b == t {
			return true
		}
	}
	return false
}
