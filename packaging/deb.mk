# packaging/deb.mk — the .deb, lintian and the packaging tests. Included from the root Makefile
# (`include packaging/deb.mk`); every path is relative to the repo root.
#
#   make deb              dist/monky-deployd_$(VERSION)_amd64.deb (static binaries built first)
#   make lintian          lintian on that .deb; any error or warning fails
#   make packaging-test   go test ./packaging/ (hermetic) + packaging/test-install.sh (real dpkg)
#
# Overrides: VERSION (default: the VERSION file), CONFIG_EXAMPLE (default: config.example.yaml),
# DEB_BINARY (a prebuilt agent to package instead of `make build`'s bin/monky-deployd).

VERSION ?= $(shell cat VERSION)
COMMIT ?= $(shell git rev-parse --short=12 HEAD 2>/dev/null)
DIST ?= dist
DEB_ARCH := amd64
DEB := $(DIST)/monky-deployd_$(VERSION)_$(DEB_ARCH).deb
DEB_STAGE := $(DIST)/stage
CONFIG_EXAMPLE ?= config.example.yaml
DEB_BINARY ?=
NFPM ?= $(GO) tool -modfile=$(TOOLS_MOD) nfpm
DEB_MAINTAINER := Tikali Monky team <monky@tikali.net>
# reproducible dates: the last commit's time (read-only git), else now
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || date +%s)
.PHONY: deb deb-binary deb-stage lintian packaging-test

# /usr/bin/monky-deployd is `make build`'s bin/monky-deployd, byte for byte: the one agent binary
# that the timer runs and every suite tests (packaging/test-install.sh compares them)
deb-binary: $(if $(DEB_BINARY),,agent)
	@mkdir -p $(DIST)
	install -m 0755 "$(or $(DEB_BINARY),$(BIN)/monky-deployd)" $(DIST)/monky-deployd

deb-stage: deb-binary
	@test -f "$(CONFIG_EXAMPLE)" || { echo "deb: $(CONFIG_EXAMPLE) is missing" >&2; exit 1; }
	rm -rf $(DEB_STAGE)
	install -d -m 0755 $(DEB_STAGE)/doc $(DEB_STAGE)/man $(DEB_STAGE)/completion
	@# shell completions come from the binary's own command definitions
	$(DIST)/monky-deployd completion bash > $(DEB_STAGE)/completion/monky-deployd.bash
	$(DIST)/monky-deployd completion zsh > $(DEB_STAGE)/completion/_monky-deployd
	$(DIST)/monky-deployd completion fish > $(DEB_STAGE)/completion/monky-deployd.fish
	chmod 0644 $(DEB_STAGE)/completion/*
	install -m 0644 "$(CONFIG_EXAMPLE)" $(DEB_STAGE)/doc/config.example.yaml
	install -m 0644 packaging/copyright $(DEB_STAGE)/doc/copyright
	@if [ -f README.md ]; then install -m 0644 README.md $(DEB_STAGE)/doc/README.md; fi
	@for f in docs/*.md; do \
		[ -f "$$f" ] || continue; \
		install -d -m 0755 $(DEB_STAGE)/doc/docs; \
		install -m 0644 "$$f" $(DEB_STAGE)/doc/docs/; \
	done
	@if [ -f CHANGELOG.md ]; then install -m 0644 CHANGELOG.md $(DEB_STAGE)/doc/CHANGELOG.md; fi
	@# a native package's changelog.gz must be in Debian format; the real history is CHANGELOG.md
	{ printf 'monky-deployd (%s) stable; urgency=medium\n\n' "$(VERSION)"; \
	  printf '  * Release %s. The changes are in /usr/share/doc/monky-deployd/CHANGELOG.md.\n\n' "$(VERSION)"; \
	  printf ' -- %s  %s\n' "$(DEB_MAINTAINER)" "$$(date -u -R -d @$(SOURCE_DATE_EPOCH))"; \
	} | gzip -9n > $(DEB_STAGE)/doc/changelog.gz
	chmod 0644 $(DEB_STAGE)/doc/changelog.gz
	gzip -9n < packaging/man/monky-deployd.8 > $(DEB_STAGE)/man/monky-deployd.8.gz
	chmod 0644 $(DEB_STAGE)/man/monky-deployd.8.gz

deb: deb-binary deb-stage
	rm -f $(DEB)
	VERSION=$(VERSION) SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) $(NFPM) package -f packaging/nfpm.yaml -p deb -t $(DIST)/
	@test -f $(DEB) || { echo "deb: $(DEB) was not produced" >&2; exit 1; }
	@# which build it packaged: the binary's own word (the default build lists no sdk transport)
	@echo "deb: $(DEB) packages $$($(DIST)/monky-deployd version | sed -n 's/^transports: /the build with transports: /p')"

lintian: deb
	lintian --fail-on error,warning --display-info $(DEB)

packaging-test:
	go test -count=1 ./packaging/
	bash packaging/test-install.sh
