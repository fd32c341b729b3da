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

CONFIG="$ROOT/etc/monky-deployd/config.yaml"
# conf KEY: a top-level scalar of config.yaml (quotes and a trailing comment dropped), or "": read
# as postrm reads it, so that what is said here is about the docker the agent will run.
conf() {
  [ -r "$CONFIG" ] || return 0
  sed -n "s/^$1:[[:space:]]*//p" "$CONFIG" | head -n 1 | sed -e 's/[[:space:]]#.*$//' -e 's/[[:space:]]*$//' -e 's/^"\(.*\)"$/\1/' -e "s/^'\(.*\)'\$/\1/"
}
DOCKER_BIN="$(conf docker_bin)"
DOCKER_BIN="${DOCKER_BIN:-docker}"
STATE_DIR="$(conf state_dir)"
STATE_DIR="${STATE_DIR:-/var/lib/monky-deployd}"
case "$DOCKER_BIN" in
  /*) docker_run="$ROOT$DOCKER_BIN" ;;
  *) docker_run="$DOCKER_BIN" ;;
esac

# where compose v2 comes from: on Debian 12 neither name the package recommends has an install
# candidate in Debian's own archive (its docker-compose is compose v1, which the agent cannot use)
compose_sources() {
  say "  on Debian 12 compose v2 is not in Debian's archive (docker-compose there is v1, which the agent cannot use); take"
  say "  Docker's apt repository (package docker-compose-plugin; https://docs.docker.com/engine/install/debian/):"
  say "    sudo install -m 0755 -d /etc/apt/keyrings"
  say "    sudo curl -fsSL https://download.docker.com/linux/debian/gpg -o /etc/apt/keyrings/docker.asc"
  # shellcheck disable=SC2016 # a line for a person to run, expanded by their shell
  say '    echo "deb [signed-by=/etc/apt/keyrings/docker.asc] https://download.docker.com/linux/debian $(. /etc/os-release && echo "$VERSION_CODENAME") stable" | sudo tee /etc/apt/sources.list.d/docker.list'
  say "    sudo apt-get update && sudo apt-get install docker-compose-plugin"
  say "  or the static plugin binary, where every docker CLI looks for it (https://github.com/docker/compose/releases):"
  say "    sudo install -m 0755 -d /usr/libexec/docker/cli-plugins"
  say "    sudo curl -fsSL -o /usr/libexec/docker/cli-plugins/docker-compose https://github.com/docker/compose/releases/latest/download/docker-compose-linux-x86_64"
  say "    sudo chmod 0755 /usr/libexec/docker/cli-plugins/docker-compose"
  say "  then check it as the agent runs it: sudo -u monky-deployd DOCKER_CONFIG=$STATE_DIR/docker $DOCKER_BIN compose version"
}

# the agent drives docker compose: docker group membership (no root). The unit names no
# SupplementaryGroups= (a missing group fails it with 216/GROUP before the agent runs): the user's
# own groups are what a tick runs with. What is missing is said here, and never fails the install.
if getent group docker >/dev/null; then
  usermod -a -G docker monky-deployd || say "could not add monky-deployd to group docker"
else
  say "no group docker (Docker Engine is not installed): until it is, and monky-deployd is in its group"
  say "  (sudo usermod -aG docker monky-deployd), every tick exits 1 with DOCKER_GROUP_MISSING or DOCKER_NOT_FOUND"
fi
# compose is judged by the docker the config names (docker_bin, default docker on PATH), with the
# agent's DOCKER_CONFIG: a plugin under root's ~/.docker is one the agent never sees
if ! command -v "$docker_run" >/dev/null 2>&1; then
  say "the docker CLI ($DOCKER_BIN, the config's docker_bin) is not there: the agent runs $DOCKER_BIN compose for every apply;"
  say "  install Docker Engine with the compose v2 plugin before enabling monky-deployd.timer"
  compose_sources
elif ! DOCKER_CONFIG="$ROOT$STATE_DIR/docker" "$docker_run" compose version >/dev/null 2>&1; then
  say "$DOCKER_BIN has no compose v2 ($DOCKER_BIN compose version fails, as the agent runs it): the agent runs"
  say "  $DOCKER_BIN compose for every apply; install the compose v2 plugin before enabling monky-deployd.timer"
  compose_sources
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

# prerm wrote this drop-in on a downgrade to a release whose unit cannot write the textfile
# directory; this package's unit can, so it goes (daemon-reload below)
METRICS_DROPIN="$ROOT/etc/systemd/system/monky-deployd.service.d/monky-deployd-metrics.conf"
if [ -e "$METRICS_DROPIN" ]; then
  rm -f "$METRICS_DROPIN"
  rmdir "${METRICS_DROPIN%/*}" 2>/dev/null || true
  say "removed ${METRICS_DROPIN#"$ROOT"}, the downgrade's drop-in: this unit writes the metrics textfile directory itself"
fi

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
# A config that makes this box always red or silent (stale_after_s below two ticks, state_dir
# under the unit's private /tmp, no metrics_path, …) or that no longer loads is said at every
# configure, an upgrade's included; it never fails the install. After the daemon-reload above:
# check config reads the unit's ReadWritePaths= from systemd, this package's unit included.
if [ -r "$CONFIG" ] && command -v monky-deployd >/dev/null 2>&1; then
  if ! checked="$(monky-deployd check config --strict "$CONFIG" 2>&1)"; then
    say "/etc/monky-deployd/config.yaml makes this box always red or silent, or does not load (check config --strict):"
    printf '%s\n' "$checked" | sed 's/^/monky-deployd:   /' >&2
  fi
fi
exit 0
