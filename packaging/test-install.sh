#!/usr/bin/env bash
# A real install of the .deb with the real dpkg, into a throwaway root: install, upgrade to a second
# build (VERSION + 1 patch), remove, purge. Asserts the files and modes, and that the timer's
# enablement survives the upgrade (the 0.1.9 incident).
#
# How: `dpkg --root=<dir> --force-script-chrootless` runs the maintainer scripts on this host with
# DPKG_ROOT=<dir>, which the scripts use as their path prefix. The commands that would change the
# host (systemctl, useradd, groupadd, usermod, getent, install -o/-g) are recording stand-ins first
# on PATH, so nothing outside <dir> is touched and every call is asserted.
#
# Usage (from the repo root): bash packaging/test-install.sh
#   DEB_BINARY=<file>      package this binary instead of building cmd/monky-deployd
#   CONFIG_EXAMPLE=<file>  default config.example.yaml; a placeholder is used when it is absent
set -euo pipefail

cd "$(dirname "$0")/.."
V1="$(cat VERSION)"
V2="${V1%.*}.$((${V1##*.} + 1))"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/monky-deployd-test-install.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
ROOT="$WORK/root"
LOG="$WORK/calls.log"
STATE="$WORK/state"
BIN="$WORK/bin"
mkdir -p "$ROOT/var/lib/dpkg/info" "$ROOT/var/lib/dpkg/updates" "$ROOT/var/lib/dpkg/triggers" "$STATE" "$BIN" "$WORK/run-systemd"
: >"$ROOT/var/lib/dpkg/status"
: >"$STATE/enabled"
: >"$STATE/getent"

fail() { echo "test-install: FAIL: $*" >&2; exit 1; }
ok() { echo "test-install: ok: $*"; }

CONFIG_EXAMPLE="${CONFIG_EXAMPLE:-config.example.yaml}"
if [ ! -f "$CONFIG_EXAMPLE" ]; then
  echo "test-install: $CONFIG_EXAMPLE is absent; packaging a placeholder" >&2
  CONFIG_EXAMPLE="$WORK/config.example.yaml"
  printf 'env_id: env-qa-02\nsite: cbs\n' >"$CONFIG_EXAMPLE"
fi
for v in "$V1" "$V2"; do
  make --no-print-directory -f packaging/deb.mk deb VERSION="$v" DIST="$WORK/dist-$v" \
    CONFIG_EXAMPLE="$CONFIG_EXAMPLE" DEB_BINARY="${DEB_BINARY:-}" >"$WORK/build-$v.log" 2>&1 ||
    { cat "$WORK/build-$v.log" >&2; fail "make deb VERSION=$v"; }
done
DEB1="$WORK/dist-$V1/monky-deployd_${V1}_amd64.deb"
DEB2="$WORK/dist-$V2/monky-deployd_${V2}_amd64.deb"

# --- recording stand-ins -------------------------------------------------------------------------------
shim() {
  {
    echo '#!/bin/sh'
    echo '{ printf "%s" "${0##*/}"; for a in "$@"; do printf " %s" "$a"; done; printf "\n"; } >>"$SHIM_LOG"'
    echo "$2"
  } >"$BIN/$1"
  chmod 0755 "$BIN/$1"
}
shim getent 'case " $(cat "$SHIM_STATE/getent") " in *" $1:$2 "*) echo "$2:x:999:"; exit 0;; esac; exit 2'
shim groupadd 'for a in "$@"; do last=$a; done; printf " group:%s " "$last" >>"$SHIM_STATE/getent"'
shim useradd 'for a in "$@"; do last=$a; done; printf " passwd:%s " "$last" >>"$SHIM_STATE/getent"'
shim usermod 'exit 0'
shim systemctl 'case "$1" in
  enable) for a in "$@"; do case $a in enable|--now) ;; *) echo "$a" >>"$SHIM_STATE/enabled";; esac; done ;;
  disable) for a in "$@"; do grep -v -x -e "$a" "$SHIM_STATE/enabled" >"$SHIM_STATE/e.tmp" || true; mv "$SHIM_STATE/e.tmp" "$SHIM_STATE/enabled"; done ;;
esac'
shim install 'n=$#; i=0
while [ $i -lt $n ]; do a=$1; shift; i=$((i+1)); case $a in -o|-g) shift; i=$((i+1));; *) set -- "$@" "$a";; esac; done
exec /usr/bin/install "$@"'

export SHIM_LOG="$LOG" SHIM_STATE="$STATE" MONKY_SYSTEMD_RUN_DIR="$WORK/run-systemd"
export PATH="$BIN:/usr/sbin:/usr/bin:/sbin:/bin"
DPKG=(dpkg --root="$ROOT" --force-not-root --force-script-chrootless --force-depends --log=/dev/null)

calls() { cat "$LOG" 2>/dev/null | sed "s|$ROOT|<ROOT>|g"; : >"$LOG"; }
expect_calls() { # label, then the exact expected calls
  local label="$1" got want
  shift
  got="$(calls)"
  want="$(printf '%s\n' "$@")"
  [ "$got" = "$want" ] || fail "$label: calls differ
--- got:
$got
--- want:
$want"
  ok "$label: maintainer script calls as expected"
}
mode_is() { # path, octal mode
  local m
  m="$(stat -c %a "$1")" || fail "$1 is missing"
  [ "$m" = "$2" ] || fail "$1 has mode $m, want $2"
}
installed_version() { dpkg-query --admindir="$ROOT/var/lib/dpkg" -W -f '${Version} ${db:Status-Abbrev}' monky-deployd 2>/dev/null || true; }

# --- 1. install ---------------------------------------------------------------------------------------
"${DPKG[@]}" -i "$DEB1" >"$WORK/dpkg.log" 2>&1 || { cat "$WORK/dpkg.log" >&2; fail "dpkg -i $DEB1"; }
expect_calls "install $V1" \
  "getent group monky-deployd" \
  "groupadd --system monky-deployd" \
  "getent passwd monky-deployd" \
  "useradd --system --gid monky-deployd --home-dir /var/lib/monky-deployd --no-create-home --shell /usr/sbin/nologin --comment Monky backend pull agent monky-deployd" \
  "getent group docker" \
  "getent group ziti" \
  "install -d -m 0700 -o monky-deployd -g monky-deployd <ROOT>/var/lib/monky-deployd" \
  "install -d -m 0750 -o root -g monky-deployd <ROOT>/etc/monky-deployd" \
  "systemctl daemon-reload"
[ "$(installed_version)" = "$V1 ii " ] || fail "dpkg status after install: $(installed_version)"
mode_is "$ROOT/usr/bin/monky-deployd" 755
for u in monky-deployd.service monky-deployd.timer monky-deployd-proxy.service; do mode_is "$ROOT/lib/systemd/system/$u" 644; done
mode_is "$ROOT/usr/share/doc/monky-deployd/copyright" 644
mode_is "$ROOT/usr/share/doc/monky-deployd/config.example.yaml" 644
mode_is "$ROOT/usr/share/man/man8/monky-deployd.8.gz" 644
mode_is "$ROOT/var/lib/monky-deployd" 700
mode_is "$ROOT/etc/monky-deployd" 750
[ ! -s "$STATE/enabled" ] || fail "the package enabled units by itself: $(cat "$STATE/enabled")"
ok "install $V1: files and modes"

# what install.sh does once config.yaml exists, and what the agent leaves in its state dir
systemctl enable --now monky-deployd.timer
printf 'env_id: env-qa-02\n' >"$ROOT/etc/monky-deployd/config.yaml"
printf 'token' >"$ROOT/var/lib/monky-deployd/bao.token"
: >"$LOG"

# --- 2. upgrade: the timer must stay enabled ------------------------------------------------------------
"${DPKG[@]}" -i "$DEB2" >"$WORK/dpkg.log" 2>&1 || { cat "$WORK/dpkg.log" >&2; fail "dpkg -i $DEB2"; }
expect_calls "upgrade $V1 -> $V2" \
  "getent group monky-deployd" \
  "getent passwd monky-deployd" \
  "getent group docker" \
  "getent group ziti" \
  "install -d -m 0700 -o monky-deployd -g monky-deployd <ROOT>/var/lib/monky-deployd" \
  "install -d -m 0750 -o root -g monky-deployd <ROOT>/etc/monky-deployd" \
  "systemctl daemon-reload" \
  "systemctl try-restart monky-deployd-proxy.service"
[ "$(installed_version)" = "$V2 ii " ] || fail "dpkg status after upgrade: $(installed_version)"
grep -x -q monky-deployd.timer "$STATE/enabled" || fail "the upgrade disabled monky-deployd.timer"
[ -f "$ROOT/etc/monky-deployd/config.yaml" ] && [ -f "$ROOT/var/lib/monky-deployd/bao.token" ] ||
  fail "the upgrade lost the config or the state"
ok "upgrade $V1 -> $V2: the timer is still enabled, config and state kept"

# --- 3. remove ----------------------------------------------------------------------------------------
"${DPKG[@]}" -r monky-deployd >"$WORK/dpkg.log" 2>&1 || { cat "$WORK/dpkg.log" >&2; fail "dpkg -r"; }
expect_calls "remove" \
  "systemctl disable --now monky-deployd.timer" \
  "systemctl stop monky-deployd.service" \
  "systemctl disable --now monky-deployd-proxy.service" \
  "systemctl daemon-reload"
[ ! -e "$ROOT/usr/bin/monky-deployd" ] || fail "remove left the binary"
[ ! -e "$ROOT/lib/systemd/system/monky-deployd.timer" ] || fail "remove left the timer unit"
[ -f "$ROOT/var/lib/monky-deployd/bao.token" ] || fail "remove (not purge) deleted the state"
! grep -x -q monky-deployd.timer "$STATE/enabled" || fail "remove left the timer enabled"
ok "remove: units disabled, binary gone, state kept"

# --- 4. purge -----------------------------------------------------------------------------------------
"${DPKG[@]}" -P monky-deployd >"$WORK/dpkg.log" 2>&1 || { cat "$WORK/dpkg.log" >&2; fail "dpkg -P"; }
expect_calls "purge"
[ ! -e "$ROOT/var/lib/monky-deployd" ] || fail "purge left the state dir"
[ -f "$ROOT/etc/monky-deployd/config.yaml" ] || fail "purge deleted the operator's config.yaml"
[ -z "$(installed_version | grep ii || true)" ] || fail "still installed after purge: $(installed_version)"
ok "purge: state dir removed, operator config kept"

echo "test-install: 4 passed, 0 failed"
