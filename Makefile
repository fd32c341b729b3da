# monky-deployd — the two commands a newcomer needs:
#   make demo   the main job against the embedded simulator (tenancy + OpenBao)
#   make test   vet, staticcheck and the hermetic test suite (no network, no root, no docker daemon)

GO ?= go
VERSION ?= $(shell cat VERSION)
COMMIT ?= $(shell git rev-parse --short=12 HEAD 2>/dev/null)
LDFLAGS := -s -w -X github.com/tikali/monky-deployd/internal/version.Version=$(VERSION) \
	-X github.com/tikali/monky-deployd/internal/version.Commit=$(COMMIT)
STATICCHECK ?= $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2
BIN := bin
# the agent is built without urfave/cli's docs generator (and its markdown libraries and their
# package inits); the man page comes from a build that keeps them: `make man`. `make build`'s
# bin/monky-deployd is the package's /usr/bin/monky-deployd, byte for byte (packaging/deb.mk)
AGENT_TAGS := urfave_cli_no_docs

.PHONY: all build agent test vet lint unit demo sdk clean

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
	echo "$(GO) test -count=1 ./..."; \
	MONKY_SKIPPED_CHECKS=$$skipped $(GO) test -count=1 ./... || st=$$?; \
	if [ -s $$skipped ]; then echo "make test: optional checks skipped (MONKY_REQUIRE_TOOLS=1 makes them fail):"; \
		sort -u $$skipped | sed 's/^/  /'; \
	else echo "make test: no optional check skipped"; fi; \
	rm -f $$skipped; exit $$st

demo: build
	bash test/demo.sh

# The sdk transport needs github.com/openziti/sdk-golang, which the module proxy this project
# builds from does not serve. Where it is reachable:
#   go get github.com/openziti/sdk-golang && go build -tags ziti ./cmd/monky-deployd
sdk:
	$(GO) get github.com/openziti/sdk-golang
	CGO_ENABLED=0 $(GO) build -tags ziti,$(AGENT_TAGS) -trimpath -ldflags "$(LDFLAGS)" -o $(BIN)/monky-deployd ./cmd/monky-deployd

clean:
	rm -rf $(BIN) dist

include packaging/deb.mk packaging/man.mk
# targets of the e2e, robustness and performance suites
-include test/*.mk
