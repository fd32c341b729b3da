#!/bin/sh
# monky-deployd postinst / rpm %post.
#   dpkg: configure [<most-recently-configured-version>] | abort-upgrade | abort-remove | abort-deconfigure
#   rpm : 1 (install) | 2 (upgrade)
# Never enables the timer on a first install: install.sh and the ansible role do that once
# config.yaml exists, and an upgrade must leave the timer exactly as the operator had it (0.1.9: an
# upgrade disabled agents). A reinstall after `dpkg -r` enables it again if it was enabled then.
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

say() { echo "monky-deployd: $*" >&2; }

# the agent drives docker compose: docker group membership (no root). The unit names no
# SupplementaryGroups= (a missing group fails it with 216/GROUP before the agent runs): the user's
# own groups are what a tick runs with. What is missing is said here, and never fails the install.
if getent group docker >/dev/null; then
  usermod -a -G docker monky-deployd || say "could not add monky-deployd to group docker"
else
  say "no group docker (Docker Engine is not installed): until it is, and monky-deployd is in its group"
  say "  (sudo usermod -aG docker monky-deployd), every tick exits 1 with DOCKER_GROUP_MISSING or DOCKER_NOT_FOUND"
fi
if ! docker compose version >/dev/null 2>&1; then
  say "docker compose (the compose v2 plugin: docker-compose-plugin or docker-compose-v2) is not installed: the agent"
  say "  runs docker compose for every apply; install it before enabling monky-deployd.timer"
fi
# A config that makes this box always red or silent (stale_after_s below two ticks, state_dir
# under the unit's private /tmp, no metrics_path, …) or that no longer loads is said at every
# configure, an upgrade's included; it never fails the install.
if [ -r "$ROOT/etc/monky-deployd/config.yaml" ] && command -v monky-deployd >/dev/null 2>&1; then
  if ! checked="$(monky-deployd check config --strict "$ROOT/etc/monky-deployd/config.yaml" 2>&1)"; then
    say "/etc/monky-deployd/config.yaml makes this box always red or silent, or does not load (check config --strict):"
    printf '%s\n' "$checked" | sed 's/^/monky-deployd:   /' >&2
  fi
fi
# The agent reads the host's ziti identity (the tunneller's file, 0640 ziti:ziti). ziti-edge-tunnel
# rewrites that file on every controller config update and the rewrite drops POSIX ACLs; group
# membership is the grant that survives it (env-dev-08, 2026-09-09).
if getent group ziti >/dev/null; then usermod -a -G ziti monky-deployd || say "could not add monky-deployd to group ziti"; fi

install -d -m 0700 -o monky-deployd -g monky-deployd "$ROOT/var/lib/monky-deployd"
rm -rf "$ROOT/var/lib/monky-deployd/.purge" # prerm's copy of the agent, for a purge that did not come
install -d -m 0750 -o root -g monky-deployd "$ROOT/etc/monky-deployd"
# The documented metrics_path directory, node_exporter's textfile collector directory: the agent
# writes its .prom file there (the unit lists it in ReadWritePaths=), node_exporter reads it.
# Group monky-deployd may write; everyone may read. Set on every configure, so a directory another
# package created first is made writable too.
install -d -m 0775 -o root -g monky-deployd "$ROOT/var/lib/prometheus/node-exporter"

# A reinstall after `dpkg -r` gives the timer back its enablement as it was (debhelper's
# deb-systemd-helper semantics): prerm remove noted an enabled timer here; purge forgets it.
WAS_ENABLED="$ROOT/var/lib/monky-deployd/.timer-was-enabled"
if [ -d "$SYSTEMD_DIR" ]; then
  systemctl daemon-reload || true
  if [ "$upgrade" = yes ]; then
    # the long-lived proxy picks up the new package; a no-op when it is not running
    systemctl try-restart monky-deployd-proxy.service || true
  fi
  if [ -e "$WAS_ENABLED" ]; then
    if systemctl enable --now monky-deployd.timer; then
      say "monky-deployd.timer was enabled before the package was removed: it is enabled again"
    else
      say "monky-deployd.timer was enabled before the package was removed and could not be enabled again (systemctl says why above)"
    fi
    rm -f "$WAS_ENABLED"
  fi
fi
exit 0
