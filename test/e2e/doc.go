// Package e2e proves monky-deployd against the real programs a box talks to: a real Vault
// configured as the seeds' OpenBao (in-process, TLS on 127.0.0.1), the real Docker engine with
// the compose v2 plugin built from the module proxy, and a registry that wants a password. The
// simulator (sim) stays tenancy, checking bearers against that Vault.
//
// It is a separate module so the agent's module stays lean, and a separate target (make e2e)
// because it needs a Docker engine. It fails when a piece cannot start; it never skips. It may
// not touch the user's ~/.docker, and it removes every container, volume, network and image it
// made (compose projects are named monky-e2e-*).
package e2e
