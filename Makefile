# monky-deployd — the two commands a newcomer needs:
#   make demo   the main job against the embedded simulator (tenancy + OpenBao)
#   make test   vet, staticcheck and the hermetic quick tier (go test -short: no network, no root, no
#               docker daemon); `make test-heavy` runs the tests it skips (HEAVY_TESTS), CI runs both

GO ?= go
VERSION ?= $(shell cat VERSION)
COMMIT ?= $(shell git rev-parse --short=12 HEAD 2>/dev/null)
LDFLAGS := -s -w -X github.com/tikali/monky-deployd/internal/version.Version=$(VERSION) \
	-X github.com/tikali/monky-deployd/internal/version.Commit=$(COMMIT)
# the build and lint tools are pinned in their own module (test/tools/go.mod: `tool` directives),
# kept apart from the agent's module graph; `go tool` builds each once into the build cache
TOOLS_MOD := $(CURDIR)/test/tools/go.mod
STATICCHECK ?= $(GO) tool -modfile=$(TOOLS_MOD) staticcheck
BIN := bin
# the agent is built without urfave/cli's docs generator (and its markdown libraries and their
# package inits); the man page comes from a build that keeps them: `make man`. `make build`'s
# bin/monky-deployd is the package's /usr/bin/monky-deployd, byte for byte (packaging/deb.mk)
AGENT_TAGS := urfave_cli_no_docs

.PHONY: all build agent test test-heavy vet lint unit demo sdk sdk-mod sdk-race sdk-test clean

all: build

build: agent
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN)/monky-sim ./cmd/monky-sim

# the agent alone, as the package ships it: every suite builds it with this recipe
# (internal/testkit.BuildAgent runs `make agent BIN=<dir>`)
agent:
	@mkdir -p $(BIN)
	CGO_ENABLED=0 $(GO) build -tags $(AGENT_TAGS) -trimpath -ldflags "$(LDFLAGS)" -o $(BIN)/monky-deployd ./cmd/monky-deployd

test: vet lint unit

vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt would change:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet ./...
	$(GO) vet -tags $(AGENT_TAGS) ./cmd/monky-deployd
	$(GO) vet -tags design ./test/bench/floor

lint:
	$(STATICCHECK) ./...
	$(STATICCHECK) -tags design ./test/bench/floor

# a test whose optional tool (groff, shellcheck, systemd-analyze, zsh, fish, promtool) is missing skips
# its check and names it here; MONKY_REQUIRE_TOOLS=1 (.ci/run) makes each of them a failure
unit:
	@skipped=$$(mktemp); st=0; \
	echo "$(GO) test -short -count=1 -timeout 30m ./..."; \
	MONKY_SKIPPED_CHECKS=$$skipped $(GO) test -short -count=1 -timeout 30m ./... || st=$$?; \
	if [ -s $$skipped ]; then echo "make test: optional checks skipped (MONKY_REQUIRE_TOOLS=1 makes them fail):"; \
		sort -u $$skipped | sed 's/^/  /'; \
	else echo "make test: no optional check skipped"; fi; \
	rm -f $$skipped; exit $$st

# The heavy tier: the tests `make test` (-short) skips because each brings boxes through many real
# ticks (testkit.Heavy(t, "make test-heavy", …)); test/tiers_test.go checks that this list and
# HEAVY_PKGS name every one. The heavy tests of the crash and soak suites run in full in
# `make crash` and `make soak` instead.
HEAVY_TESTS := TestSupportCorpus|TestFixLinesClearTheBox|TestDemo|TestPowerLossMatrix|TestAnOutageIsTimedFromItsFirstTick
HEAVY_PKGS := ./states ./cmd/monky-deployd

test-heavy:
	$(GO) test -count=1 -timeout 40m -run '^($(HEAVY_TESTS))$$' $(HEAVY_PKGS)

demo: build
	bash test/demo.sh

# The agent with the sdk transport (the OpenZiti SDK, -tags ziti), built as `agent` builds it, to
# $(SDK_BIN). It builds with a modfile of its own, written to $(SDK_MOD): this module's go.mod with
# the SDK required and, where ZITI_SRC names a folder of OpenZiti sources, the eight OpenZiti
# modules replaced by its folders (../shared/third_party/openziti when it is there; its README);
# every other module comes from the module proxy, their sums in $(SDK_MOD)/go.sum. With ZITI_SRC
# empty the SDK comes from the module proxy too. go.mod and go.sum never name the SDK.
#   make sdk                      bin/monky-deployd-sdk
#   make sdk ZITI_SRC=            the SDK from the module proxy
#   make sdk-test                 vet and test the packages the tag changes, then test/sdk.sh
ZITI_SDK_VERSION := v1.7.0
ZITI_SRC ?= $(abspath $(wildcard ../shared/third_party/openziti))
ZITI_MODULES := sdk-golang=github.com/openziti/sdk-golang channel=github.com/openziti/channel/v4 \
	edge-api=github.com/openziti/edge-api foundation=github.com/openziti/foundation/v2 \
	identity=github.com/openziti/identity metrics=github.com/openziti/metrics \
	secretstream=github.com/openziti/secretstream transport=github.com/openziti/transport/v2
SDK_MOD ?= $(BIN)/sdk-mod
SDK_BIN ?= $(BIN)/monky-deployd-sdk
SDK_GOFLAGS = -mod=mod -modfile=$(abspath $(SDK_MOD))/go.mod -tags ziti,$(AGENT_TAGS)
# the packages that build differently with -tags ziti, and the binary's tests that run a transport
SDK_TEST_PKGS := ./transport ./internal/config ./internal/version ./cmd/monky-deployd

sdk: sdk-mod
	CGO_ENABLED=0 $(GO) build $(SDK_GOFLAGS) -trimpath -ldflags "$(LDFLAGS)" -o $(SDK_BIN) ./cmd/monky-deployd
	$(SDK_BIN) version

# the modfile: written afresh each time from go.mod; its go.sum keeps the sums of earlier runs
sdk-mod:
	@mkdir -p $(SDK_MOD)
	cp go.mod $(SDK_MOD)/go.mod
	cat go.sum $$( [ -f $(SDK_MOD)/go.sum ] && echo $(SDK_MOD)/go.sum ) | sort -u >$(SDK_MOD)/go.sum.new
	mv $(SDK_MOD)/go.sum.new $(SDK_MOD)/go.sum
	$(GO) mod edit -modfile=$(SDK_MOD)/go.mod -require=github.com/openziti/sdk-golang@$(ZITI_SDK_VERSION)
	@if [ -n "$(ZITI_SRC)" ]; then for m in $(ZITI_MODULES); do \
		test -f "$(ZITI_SRC)/$${m%%=*}/go.mod" || { echo "sdk: $(ZITI_SRC)/$${m%%=*} holds no go.mod" >&2; exit 1; }; \
		echo "$(GO) mod edit -modfile=$(SDK_MOD)/go.mod -replace=$${m#*=}=$(ZITI_SRC)/$${m%%=*}"; \
		$(GO) mod edit -modfile=$(SDK_MOD)/go.mod -replace=$${m#*=}=$(ZITI_SRC)/$${m%%=*} || exit 1; \
	done; else echo "sdk: ZITI_SRC is empty: the OpenZiti modules come from the module proxy"; fi

# the sdk build with the race detector (cgo), as `sdk` builds it otherwise: an instrument of
# mesh-e2e's loop through the mesh, never packaged
SDK_RACE_BIN ?= $(BIN)/monky-deployd-sdk-race
sdk-race: sdk-mod
	CGO_ENABLED=1 $(GO) build -race $(SDK_GOFLAGS) -trimpath -ldflags "$(LDFLAGS)" -o $(SDK_RACE_BIN) ./cmd/monky-deployd

sdk-test: sdk
	$(GO) vet $(SDK_GOFLAGS) $(SDK_TEST_PKGS)
	$(GO) test -count=1 $(SDK_GOFLAGS) $(SDK_TEST_PKGS)
	bash test/sdk.sh $(SDK_BIN)

clean:
	rm -rf $(BIN) dist

include packaging/deb.mk packaging/man.mk
# targets of the e2e, robustness and performance suites
-include test/*.mk
