package effects

import (
	"encoding/json"
	"errors"
	"strings"
)

// ParseRegistryAuth reads the manifest's registry-auth value: a JSON object
// {"registry", "username", "password"} (registry optional, then defaultRegistry) or a bare
// `username:password` (the password may hold ':'), whose registry is defaultRegistry.
// Errors say what is wrong with the shape and never include the value.
func ParseRegistryAuth(value, defaultRegistry string) (RegistryAuth, error) {
	text := strings.TrimSpace(value)
	if text == "" {
		return RegistryAuth{}, errors.New("registry credential is empty")
	}
	if strings.HasPrefix(text, "{") {
		var j struct {
			Registry string `json:"registry"`
			Username string `json:"username"`
			Password string `json:"password"`
		}
		if json.Unmarshal([]byte(text), &j) != nil { // the decoder's error quotes the input
			return RegistryAuth{}, errors.New("registry credential is not valid JSON of the shape {registry, username, password}")
		}
		if j.Username == "" || j.Password == "" {
			return RegistryAuth{}, errors.New("registry credential JSON needs username and password")
		}
		reg := strings.TrimSpace(j.Registry)
		if reg == "" {
			reg = defaultRegistry
		}
		if reg == "" {
			return RegistryAuth{}, errors.New("registry credential names no registry and registry_host is not set")
		}
		return RegistryAuth{Registry: reg, Username: j.Username, Password: j.Password}, nil
	}
	user, pw, ok := strings.Cut(text, ":")
	if !ok || user == "" || pw == "" {
		return RegistryAuth{}, errors.New("registry credential is neither JSON nor username:password")
	}
	if strings.ContainsAny(text, "\n\r") {
		return RegistryAuth{}, errors.New("registry credential username:password holds a line break")
	}
	if defaultRegistry == "" {
		return RegistryAuth{}, errors.New("registry credential username:password needs registry_host in the config")
	}
	return RegistryAuth{Registry: defaultRegistry, Username: user, Password: pw}, nil
}
