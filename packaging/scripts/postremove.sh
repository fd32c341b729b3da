#!/bin/sh
# monky-deployd postrm / rpm %postun.
#   dpkg: remove | purge | upgrade <new-version> | failed-upgrade <old-version> |
#         abort-install [<old-version>] | abort-upgrade <old-version> | disappear …
#   rpm : 0 (erase) | 1 (upgrade)
#
# Neither remove nor purge stops a service the agent started: the backend's containers keep
# running, and their compose project (<deploy_dir>: releases/, current) stays on disk so that a
# person can still `docker compose down` them. Each says how.
#   remove: prerm stopped and disabled the timer (noting whether it was enabled, for a reinstall);
#           config and state are kept (a reinstall resumes); the metrics textfile (metrics_path) is
#           removed, so no alert keeps reading a box that no longer runs the agent.
#   purge:  revokes the box's OpenBao token at OpenBao when it answers (`monky-deployd purge`, the
#           agent prerm kept aside), which also says what stays: the deploy directory, its files
#           holding secret values (.env, resolved models), the running containers. Then it
#           removes the agent's own state — token, leased grant, state file (its receipt, any
#           corrupt copy), lock, docker config, metrics counters, 0.1.x's state.json — the metrics
#           textfile (metrics_path) and /etc/monky-deployd (config, bootstrap grant, CA), and
#           gives node_exporter's textfile directory back to root. It
#           leaves every deploy directory (a directory holding releases/ or current) and the
#           monky-deployd user, which owns them.
# MONKY_ROOT (tests only) or DPKG_ROOT (dpkg --root with --force-script-chrootless) prefixes the
# filesystem paths.
set -e

ROOT="${MONKY_ROOT:-${DPKG_ROOT:-}}"
SYSTEMD_DIR="${MONKY_SYSTEMD_RUN_DIR:-/run/systemd/system}"
CONFIG="$ROOT/etc/monky-deployd/config.yaml"

say() { echo "monky-deployd: $*" >&2; }

# conf KEY: a top-level scalar of config.yaml (quotes and a trailing comment dropped), or "".
conf() {
  [ -r "$CONFIG" ] || return 0
  sed -n "s/^$1:[[:space:]]*//p" "$CONFIG" | head -n 1 | sed -e 's/[[:space:]]#.*$//' -e 's/[[:space:]]*$//' -e 's/^"\(.*\)"$/\1/' -e "s/^'\(.*\)'\$/\1/"
}

ENV_ID="$(conf env_id)"
STATE_DIR="$(conf state_dir)"
STATE_DIR="${STATE_DIR:-/var/lib/monky-deployd}"
DEPLOY_DIR="$(conf deploy_dir)"
[ -n "$DEPLOY_DIR" ] || [ -z "$ENV_ID" ] || DEPLOY_DIR="$STATE_DIR/$ENV_ID"
PROJECT="$(conf compose_project)"
[ -n "$PROJECT" ] || [ -z "$ENV_ID" ] || PROJECT="monky-$ENV_ID"
METRICS="$(conf metrics_path)"

is_deploy_dir() { [ -d "$1/releases" ] || [ -L "$1/current" ]; }

# how_to_take_down DIR: the commands that stop the services of the compose project in DIR.
how_to_take_down() {
  p="$PROJECT"
  [ -n "$p" ] || p="monky-$(basename "$1")"
  say "  the services of $p keep running from ${1#"$ROOT"}/current; to take them down and remove their files:"
  say "    cd ${1#"$ROOT"}/current && sudo docker compose -p $p down"
  say "    sudo rm -rf ${1#"$ROOT"}"
}

case "${1:-}" in
  remove | 0)
    if [ -d "$SYSTEMD_DIR" ]; then systemctl daemon-reload || true; fi
    case "$METRICS" in /*) rm -f "$ROOT$METRICS" ;; esac
    say "removed: the timer is stopped; config.yaml and the state in $STATE_DIR are kept (a reinstall resumes;"
    say "  dpkg --purge monky-deployd removes the agent's own state). Nothing converges the backend now."
    if [ -n "$DEPLOY_DIR" ] && is_deploy_dir "$ROOT$DEPLOY_DIR"; then how_to_take_down "$ROOT$DEPLOY_DIR"; fi
    ;;
  purge)
    # the token is revoked at OpenBao first, while the config and the token are still there
    # (prerm kept the agent aside: dpkg has removed /usr/bin/monky-deployd by now); what stays
    # is said by the agent, which reads the config as a tick does
    HELPER="$ROOT/var/lib/monky-deployd/.purge/monky-deployd"
    if [ -x "$HELPER" ] && [ -r "$CONFIG" ]; then
      "$HELPER" --config "$CONFIG" purge 2>&1 | sed 's/^/monky-deployd: /' >&2 || true
    elif [ -e "$ROOT$STATE_DIR/bao.token" ]; then
      say "token: NOT revoked (the agent was not kept aside to do it); it is deleted here and stays valid at OpenBao until its TTL ends"
    fi
    kept=""
    if [ -d "$ROOT$STATE_DIR" ]; then
      for f in "$ROOT$STATE_DIR"/* "$ROOT$STATE_DIR"/.[!.]*; do
        [ -e "$f" ] || [ -L "$f" ] || continue
        if [ -d "$f" ] && [ ! -L "$f" ] && is_deploy_dir "$f"; then
          kept="$kept $f"
          continue
        fi
        rm -rf "$f"
      done
      [ -n "$kept" ] || rmdir "$ROOT$STATE_DIR" 2>/dev/null || true
    fi
    if [ -n "$DEPLOY_DIR" ] && is_deploy_dir "$ROOT$DEPLOY_DIR"; then
      case " $kept " in *" $ROOT$DEPLOY_DIR "*) ;; *) kept="$kept $ROOT$DEPLOY_DIR" ;; esac
    fi
    case "$METRICS" in /*) rm -f "$ROOT$METRICS" ;; esac
    rm -f "$ROOT/var/lib/monky-deployd/.timer-was-enabled" # a later install starts with the timer off
    rmdir "$ROOT/var/lib/monky-deployd" 2>/dev/null || true
    rm -f "$CONFIG" "$ROOT/etc/monky-deployd/bootstrap.jwt" "$ROOT/etc/monky-deployd/bootstrap.staged" "$ROOT/etc/monky-deployd/openbao-ca.pem" "$ROOT/etc/monky-deployd/proxy.env"
    # node_exporter's textfile directory, made group-writable for the agent by postinst, goes
    # back to root: the kept user no longer writes there
    TEXTFILE_DIR="$ROOT/var/lib/prometheus/node-exporter"
    if [ -d "$TEXTFILE_DIR" ] && [ "$(stat -c %G "$TEXTFILE_DIR" 2>/dev/null)" = monky-deployd ]; then
      chgrp root "$TEXTFILE_DIR" && chmod 0755 "$TEXTFILE_DIR" &&
        say "${TEXTFILE_DIR#"$ROOT"} is root's again (it was group monky-deployd, writable)"
    fi
    rmdir "$ROOT/etc/monky-deployd" 2>/dev/null || true
    say "purged: the agent's token, state file, docker config, metrics and /etc/monky-deployd are gone."
    if [ -n "$kept" ]; then
      say "Nothing was stopped, and the deploy directories are left:"
      for d in $kept; do how_to_take_down "$d"; done
      say "  the user monky-deployd owns them and is kept; once they are gone: sudo deluser --system monky-deployd"
    else
      say "  the user monky-deployd is kept (files it owns may remain elsewhere): sudo deluser --system monky-deployd"
    fi
    ;;
  *) ;;
esac
exit 0
