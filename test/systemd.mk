# The package under real systemd (docs/TESTING.md, "systemd-e2e"):
#   make systemd-e2e   boots a Debian bookworm with systemd as PID 1 in systemd-nspawn, installs the
#                      .deb with dpkg, lets its timer tick against monky-sim (a recording docker
#                      stub, then the host's real Docker engine) and proves the steps of
#                      test/systemd/run.sh. Needs root, systemd-nspawn, debootstrap and a Docker
#                      engine; the compose plugin is make e2e's, cached under $(E2E_CACHE).
# The rootfs is cached under $(SYSTEMD_E2E_CACHE), keyed by its package list: only the first run
# builds it (about 2 minutes through apt's Debian mirror).
SYSTEMD_E2E_CACHE ?= $(shell $(GO) env GOCACHE)/../monky-systemd

.PHONY: systemd-e2e
systemd-e2e:
	MONKY_SYSTEMD_CACHE=$(abspath $(SYSTEMD_E2E_CACHE)) MONKY_E2E_CACHE=$(abspath $(E2E_CACHE)) bash test/systemd/run.sh
