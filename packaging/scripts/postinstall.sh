#!/bin/sh
# monky-deployd postinst / rpm %post.
#   dpkg: configure [<most-recently-configured-version>] | abort-upgrade | abort-remove | abort-deconfigure
#   rpm : 1 (install) | 2 (upgrade)
# Never enables the timer: install.sh and the ansible role do that once config.yaml exists, and an
# upgrade must leave the timer exactly as the operator had it (0.1.9: an upgrade disabled agents).
# MONKY_ROOT (tests only) or DPKG_ROOT (dpkg --root with --force-script-chrootless) prefixes the
# filesystem paths; MONKY_SYSTEMD_RUN_DIR stands in for
# /run/systemd/system, the "systemd is PID 1" marker.
set -e

ROOT="${MONKY_ROOT:-${DPKG_ROOT:-}}"
SYSTEMD_DIR="${MONKY_SYSTEMD_RUN_DIR:-/run/systemd/system}"

upgrade=no
case "${1:-}" in
  configure) [ -n "${2:-}" ] && upgrade=yes ;;
  1) ;;
  2) upgrade=yes ;;
  *) exit 0 ;; # abort-*: prerm and preinst change nothing on an upgrade, so nothing to undo
esac

# the agent drives docker compose: docker group membership (no root)
if getent group docker >/dev/null; then usermod -a -G docker monky-deployd || echo "monky-deployd: could not add monky-deployd to group docker" >&2; fi
# The agent reads the host's ziti identity (the tunneller's file, 0640 ziti:ziti). ziti-edge-tunnel
# rewrites that file on every controller config update and the rewrite drops POSIX ACLs; group
# membership is the grant that survives it (env-dev-08, 2026-09-09).
if getent group ziti >/dev/null; then usermod -a -G ziti monky-deployd || echo "monky-deployd: could not add monky-deployd to group ziti" >&2; fi

install -d -m 0700 -o monky-deployd -g monky-deployd "$ROOT/var/lib/monky-deployd"
install -d -m 0750 -o root -g monky-deployd "$ROOT/etc/monky-deployd"
# The documented metrics_path directory, node_exporter's textfile collector directory: the agent
# writes its .prom file there (the unit lists it in ReadWritePaths=), node_exporter reads it.
# Group monky-deployd may write; everyone may read. Set on every configure, so a directory another
# package created first is made writable too.
install -d -m 0775 -o root -g monky-deployd "$ROOT/var/lib/prometheus/node-exporter"

if [ -d "$SYSTEMD_DIR" ]; then
  systemctl daemon-reload || true
  if [ "$upgrade" = yes ]; then
    # the long-lived proxy picks up the new package; a no-op when it is not running
    systemctl try-restart monky-deployd-proxy.service || true
  fi
fi
exit 0
