# End to end against the real programs (docs/TESTING.md, "e2e"):
#   make e2e   a real Vault (in-process, as OpenBao), the real Docker engine with the compose v2
#              plugin built from the module proxy, a registry with a password. Needs a Docker
#              engine; fails loudly when the engine, compose, Vault or the registry cannot start.
# The compose plugins are cached under $(E2E_CACHE) (keyed by version): only the first run builds them.
E2E_CACHE ?= $(shell $(GO) env GOCACHE)/../monky-e2e
E2E_TIMEOUT ?= 40m

.PHONY: e2e
e2e:
	@docker info >/dev/null 2>&1 || { echo "make e2e: the Docker engine does not answer (docker info failed): this suite needs one" >&2; exit 1; }
	cd test/e2e && MONKY_E2E_CACHE=$(abspath $(E2E_CACHE)) $(GO) test -count=1 -timeout $(E2E_TIMEOUT) ./...
