#!/usr/bin/env bash
# A real install of the .deb with the real dpkg, into a throwaway root: install, upgrade to a second
# build (VERSION + 1 patch), remove, reinstall, purge, install again. Asserts the files and modes,
# that the timer's enablement survives the upgrade (the 0.1.9 incident) and a remove-reinstall, that
# purge forgets it, and that remove takes the metrics textfile. Then, against monky-sim: a 0.1.9-shaped
# package (testdata/takeover/pkg-0.1.9, built with nfpm) with a 0.1.9 box's files, upgraded to this
# .deb, whose first tick heartbeats without a lease or a login; its remove and purge; and a fresh
# install whose config is env_id, site and the kit's files only, which applies a release.
#
# How: `dpkg --root=<dir> --force-script-chrootless` runs the maintainer scripts on this host with
# DPKG_ROOT=<dir>, which the scripts use as their path prefix. The commands that would change the
# host (systemctl, useradd, groupadd, usermod, getent, install -o/-g) are recording stand-ins first
# on PATH, so nothing outside <dir> is touched and every call is asserted.
#
# Usage (from the repo root): bash packaging/test-install.sh
#   DEB_BINARY=<file>      package this agent instead of `make build`'s bin/monky-deployd
#   CONFIG_EXAMPLE=<file>  default config.example.yaml; a placeholder is used when it is absent
set -euo pipefail

cd "$(dirname "$0")/.."
GO="$(command -v go)"
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
# nfpm.yaml reads dist/: each version is built there in turn and its .deb copied out
for v in "$V1" "$V2"; do
  make --no-print-directory deb VERSION="$v" \
    CONFIG_EXAMPLE="$CONFIG_EXAMPLE" DEB_BINARY="${DEB_BINARY:-}" >"$WORK/build-$v.log" 2>&1 ||
    { cat "$WORK/build-$v.log" >&2; fail "make deb VERSION=$v"; }
  cp "dist/monky-deployd_${v}_amd64.deb" "$WORK/"
done
DEB1="$WORK/monky-deployd_${V1}_amd64.deb"
DEB2="$WORK/monky-deployd_${V2}_amd64.deb"

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
shim docker 'exit 1' # no compose plugin: postinst says so
shim systemctl 'case "$1" in
  enable) for a in "$@"; do case $a in enable|--now) ;; *) echo "$a" >>"$SHIM_STATE/enabled";; esac; done ;;
  disable) for a in "$@"; do grep -v -x -e "$a" "$SHIM_STATE/enabled" >"$SHIM_STATE/e.tmp" || true; mv "$SHIM_STATE/e.tmp" "$SHIM_STATE/enabled"; done ;;
  is-enabled) for a in "$@"; do last=$a; done; grep -q -x -e "$last" "$SHIM_STATE/enabled"; exit $? ;;
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
  "docker compose version" \
  "getent group ziti" \
  "install -d -m 0700 -o monky-deployd -g monky-deployd <ROOT>/var/lib/monky-deployd" \
  "install -d -m 0750 -o root -g monky-deployd <ROOT>/etc/monky-deployd" \
  "install -d -m 0775 -o root -g monky-deployd <ROOT>/var/lib/prometheus/node-exporter" \
  "systemctl daemon-reload"
[ "$(installed_version)" = "$V1 ii " ] || fail "dpkg status after install: $(installed_version)"
mode_is "$ROOT/usr/bin/monky-deployd" 755
[ ! -e "$ROOT/usr/libexec/monky-deployd" ] || fail "the package installs a second agent under /usr/libexec"
# one program: the package's binary is make build's, byte for byte (a build of its own here, so
# that the two being equal also shows the build is reproducible)
if [ -z "${DEB_BINARY:-}" ]; then
  make --no-print-directory agent GO="$GO" VERSION="$V1" BIN="$WORK/ref" >"$WORK/build-ref.log" 2>&1 ||
    { cat "$WORK/build-ref.log" >&2; fail "make agent VERSION=$V1"; }
  cmp -s "$ROOT/usr/bin/monky-deployd" "$WORK/ref/monky-deployd" ||
    fail "/usr/bin/monky-deployd is not make build's bin/monky-deployd (same tags and flags, -trimpath)"
  ok "install $V1: /usr/bin/monky-deployd is make build's bin/monky-deployd, byte for byte"
fi
for u in monky-deployd.service monky-deployd.timer monky-deployd-proxy.service; do mode_is "$ROOT/lib/systemd/system/$u" 644; done
mode_is "$ROOT/usr/share/doc/monky-deployd/copyright" 644
mode_is "$ROOT/usr/share/doc/monky-deployd/config.example.yaml" 644
mode_is "$ROOT/usr/share/man/man8/monky-deployd.8.gz" 644
mode_is "$ROOT/var/lib/monky-deployd" 700
mode_is "$ROOT/etc/monky-deployd" 750
[ ! -s "$STATE/enabled" ] || fail "the package enabled units by itself: $(cat "$STATE/enabled")"
grep -q "no group docker" "$WORK/dpkg.log" && grep -q "compose for every apply" "$WORK/dpkg.log" && grep -q "docker-compose-plugin" "$WORK/dpkg.log" ||
  { cat "$WORK/dpkg.log" >&2; fail "postinst did not say that the docker group and the compose plugin are missing"; }
ok "install $V1: files and modes; postinst said the docker group and the compose plugin are missing"

# what install.sh does once config.yaml exists, and what the agent leaves in its state dir
systemctl enable --now monky-deployd.timer
PROM=/var/lib/prometheus/node-exporter/monky_deployd.prom
printf 'env_id: env-qa-02\nmetrics_path: %s\n' "$PROM" >"$ROOT/etc/monky-deployd/config.yaml"
printf 'token' >"$ROOT/var/lib/monky-deployd/bao.token"
printf 'monky_deployd_last_tick_exit_code 0\n' >"$ROOT$PROM"
: >"$LOG"

# --- 2. upgrade: the timer must stay enabled ------------------------------------------------------------
"${DPKG[@]}" -i "$DEB2" >"$WORK/dpkg.log" 2>&1 || { cat "$WORK/dpkg.log" >&2; fail "dpkg -i $DEB2"; }
expect_calls "upgrade $V1 -> $V2" \
  "getent group monky-deployd" \
  "getent passwd monky-deployd" \
  "getent group docker" \
  "docker compose version" \
  "getent group ziti" \
  "install -d -m 0700 -o monky-deployd -g monky-deployd <ROOT>/var/lib/monky-deployd" \
  "install -d -m 0750 -o root -g monky-deployd <ROOT>/etc/monky-deployd" \
  "install -d -m 0775 -o root -g monky-deployd <ROOT>/var/lib/prometheus/node-exporter" \
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
  "systemctl is-enabled --quiet monky-deployd.timer" \
  "systemctl disable --now monky-deployd.timer" \
  "systemctl stop monky-deployd.service" \
  "systemctl disable --now monky-deployd-proxy.service" \
  "systemctl daemon-reload"
[ ! -e "$ROOT/usr/bin/monky-deployd" ] || fail "remove left the binary"
[ ! -e "$ROOT/lib/systemd/system/monky-deployd.timer" ] || fail "remove left the timer unit"
[ -f "$ROOT/var/lib/monky-deployd/bao.token" ] || fail "remove (not purge) deleted the state"
! grep -x -q monky-deployd.timer "$STATE/enabled" || fail "remove left the timer enabled"
[ ! -e "$ROOT$PROM" ] || fail "remove left the metrics textfile $PROM (its staleness alert would fire for ever)"
ok "remove: units disabled, binary and metrics textfile gone, state kept"

# --- 3b. reinstall after remove: the timer is enabled again, as it was ---------------------------------
"${DPKG[@]}" -i "$DEB2" >"$WORK/dpkg.log" 2>&1 || { cat "$WORK/dpkg.log" >&2; fail "dpkg -i $DEB2 after dpkg -r"; }
expect_calls "reinstall after remove" \
  "getent group monky-deployd" \
  "getent passwd monky-deployd" \
  "getent group docker" \
  "docker compose version" \
  "getent group ziti" \
  "install -d -m 0700 -o monky-deployd -g monky-deployd <ROOT>/var/lib/monky-deployd" \
  "install -d -m 0750 -o root -g monky-deployd <ROOT>/etc/monky-deployd" \
  "install -d -m 0775 -o root -g monky-deployd <ROOT>/var/lib/prometheus/node-exporter" \
  "systemctl daemon-reload" \
  "systemctl try-restart monky-deployd-proxy.service" \
  "systemctl enable --now monky-deployd.timer"
grep -x -q monky-deployd.timer "$STATE/enabled" || fail "the reinstall after dpkg -r left the timer disabled"
grep -q "it is enabled again" "$WORK/dpkg.log" || { cat "$WORK/dpkg.log" >&2; fail "postinst did not say the timer is enabled again"; }
ok "reinstall after remove: the timer is enabled again, as it was"

# --- 4. purge -----------------------------------------------------------------------------------------
"${DPKG[@]}" -P monky-deployd >"$WORK/dpkg.log" 2>&1 || { cat "$WORK/dpkg.log" >&2; fail "dpkg -P"; }
expect_calls "purge" \
  "systemctl is-enabled --quiet monky-deployd.timer" \
  "systemctl disable --now monky-deployd.timer" \
  "systemctl stop monky-deployd.service" \
  "systemctl disable --now monky-deployd-proxy.service" \
  "systemctl daemon-reload"
[ ! -e "$ROOT/var/lib/monky-deployd" ] || fail "purge left the state dir (it holds no deploy dir): $(ls -A "$ROOT/var/lib/monky-deployd")"
[ ! -e "$ROOT/etc/monky-deployd" ] || fail "purge left /etc/monky-deployd: $(ls -A "$ROOT/etc/monky-deployd")"
[ -z "$(installed_version | grep ii || true)" ] || fail "still installed after purge: $(installed_version)"
ok "purge: state dir and config removed"

# --- 4b. install after purge: the timer's enablement is forgotten ----------------------------------------
"${DPKG[@]}" -i "$DEB1" >"$WORK/dpkg.log" 2>&1 || { cat "$WORK/dpkg.log" >&2; fail "dpkg -i $DEB1 after purge"; }
! grep -x -q monky-deployd.timer "$STATE/enabled" || fail "an install after purge enabled the timer"
calls >/dev/null
"${DPKG[@]}" -P monky-deployd >"$WORK/dpkg.log" 2>&1 || { cat "$WORK/dpkg.log" >&2; fail "dpkg -P (after 4b)"; }
calls >/dev/null
ok "install after purge: the timer stays disabled (purge forgot it)"

# === against monky-sim: the upgrade of a 0.1.9 box, and a fresh install with the defaults ================
SIM_ENV=env-demo-01
FX=testdata/takeover/box-0.1.9/var/lib/monky-deployd
FX_V2=b14f6e29f20b7e8be6862087b4725720d7ac719bda0303b8a3d1c6f360a3db29
"$GO" build -o "$WORK/monky-sim" ./cmd/monky-sim
"$GO" build -o "$WORK/fakedocker" ./test/fakedocker
export FAKE_DOCKER_STATE="$WORK/docker-state" FAKE_DOCKER_LOG="$WORK/docker.log"
mkdir -p "$FAKE_DOCKER_STATE"
# the agent hands docker an environment it sets whole: the stub's knobs travel in a wrapper
printf '#!/bin/sh\nFAKE_DOCKER_STATE=%q FAKE_DOCKER_LOG=%q exec %q "$@"\n' \
  "$FAKE_DOCKER_STATE" "$FAKE_DOCKER_LOG" "$WORK/fakedocker" >"$WORK/docker"
chmod 0755 "$WORK/docker"
ROOT2="$WORK/root-0.1.9"
ROOT3="$WORK/root-fresh"
for r in "$ROOT2" "$ROOT3"; do
  mkdir -p "$r/var/lib/dpkg/info" "$r/var/lib/dpkg/updates" "$r/var/lib/dpkg/triggers"
  : >"$r/var/lib/dpkg/status"
done
"$WORK/monky-sim" serve --quiet --releases testdata/demo --env "$SIM_ENV" --desire v2 --addr-file "$WORK/addrs.json" \
  --kit "$WORK/kit-b" --state-dir "$ROOT2/var/lib/monky-deployd" --docker-bin "$WORK/docker" >"$WORK/sim.log" 2>&1 &
SIM_PID=$!
trap 'kill "$SIM_PID" 2>/dev/null || true; rm -rf "$WORK"' EXIT
for _ in $(seq 100); do [ -s "$WORK/addrs.json" ] && break; sleep 0.1; done
[ -s "$WORK/addrs.json" ] || { cat "$WORK/sim.log" >&2; fail "monky-sim did not start"; }
sim() { "$WORK/monky-sim" "$@" --addr-file "$WORK/addrs.json"; }
count() { sim counts --env "$SIM_ENV" | jq -r ".$1"; }
agent() { local r="$1"; shift; "$r/usr/bin/monky-deployd" --config "$r/etc/monky-deployd/config.yaml" "$@"; }

# --- 5. a 0.1.9-shaped package, as the Python agent's boxes run it ----------------------------------------
tools_mod="$PWD/test/tools/go.mod" # nfpm, pinned by a tool directive
( cd testdata/takeover/pkg-0.1.9 && ${NFPM:-"$GO" tool -modfile="$tools_mod" nfpm} package -f nfpm.yaml -p deb -t "$WORK/" ) \
  >"$WORK/build-0.1.9.log" 2>&1 || { cat "$WORK/build-0.1.9.log" >&2; fail "nfpm: the 0.1.9-shaped package"; }
DPKG2=(dpkg --root="$ROOT2" --force-not-root --force-script-chrootless --force-depends --log=/dev/null)
"${DPKG2[@]}" -i "$WORK/monky-deployd_0.1.9_amd64.deb" >"$WORK/dpkg.log" 2>&1 || { cat "$WORK/dpkg.log" >&2; fail "dpkg -i 0.1.9"; }
[ -x "$ROOT2/opt/monky-deployd/venv/bin/python" ] || fail "the 0.1.9 package did not install its venv"
# what 0.1.9's install.sh and its ticks left: config, timer, token, state.json, two releases, current
cp "$WORK/kit-b/config.yaml" "$ROOT2/etc/monky-deployd/config.yaml"
cp -a "$FX/." "$ROOT2/var/lib/monky-deployd/"
BAO_URL="$(jq -r .bao "$WORK/addrs.json")"
jq -n --rawfile g "$WORK/kit-b/bootstrap.jwt" '{role: "see-env", jwt: ($g | rtrimstr("\n"))}' |
  curl -fsS -H 'Content-Type: application/json' --data @- "$BAO_URL/v1/auth/jwt-tenancy/login" |
  jq -j '.auth.client_token + "\n"' >"$ROOT2/var/lib/monky-deployd/bao.token"
[ -s "$ROOT2/var/lib/monky-deployd/bao.token" ] || fail "could not log in to the simulated OpenBao"
rm -f "$WORK/kit-b/bootstrap.jwt"
chmod 0600 "$ROOT2/var/lib/monky-deployd/bao.token" "$ROOT2/var/lib/monky-deployd/$SIM_ENV/releases"/*/.env
(cd "$ROOT2/var/lib/monky-deployd/$SIM_ENV/current" && "$WORK/docker" compose -p "monky-$SIM_ENV" -f compose.yaml up -d --remove-orphans >/dev/null 2>&1)
: >"$FAKE_DOCKER_LOG"
systemctl enable --now monky-deployd.timer
LEGACY_SUM="$(sha256sum <"$ROOT2/var/lib/monky-deployd/state.json")"
: >"$LOG"
ok "0.1.9-shaped package installed with the real dpkg; the 0.1.9 box is in place"

# --- 6. upgrade 0.1.9 -> this package, then one tick: a heartbeat, no lease, no login ----------------------
"${DPKG2[@]}" -i "$DEB1" >"$WORK/dpkg.log" 2>&1 || { cat "$WORK/dpkg.log" >&2; fail "dpkg -i $DEB1 over 0.1.9"; }
[ "$(dpkg-query --admindir="$ROOT2/var/lib/dpkg" -W -f '${Version}' monky-deployd)" = "$V1" ] || fail "not upgraded to $V1"
[ ! -e "$ROOT2/opt/monky-deployd" ] || fail "the upgrade left 0.1.9's venv"
grep -x -q monky-deployd.timer "$STATE/enabled" || fail "the upgrade from 0.1.9 disabled the timer"
before_leases="$(count leases)"; before_logins="$(count logins)"; before_reports="$(count reports)"
st=0; agent "$ROOT2" run --once >"$WORK/tick.log" 2>&1 || st=$?
[ "$st" -eq 0 ] || { cat "$WORK/tick.log" >&2; fail "the first tick after the upgrade exited $st"; }
[ "$(count leases)" = "$before_leases" ] && [ "$(count lease_asks)" = 0 ] || fail "the taken-over box asked for a lease"
[ "$(count logins)" = "$before_logins" ] || fail "the taken-over box logged in again"
[ "$(count reports)" = $((before_reports + 1)) ] || fail "no heartbeat report"
sim reports --env "$SIM_ENV" | tail -n 1 | jq -e --arg s "$FX_V2" '.result == "applied" and .sha == $s' >/dev/null ||
  fail "the last report is not a heartbeat of the running release: $(sim reports --env "$SIM_ENV" | tail -n 1)"
if grep -q -E '"(pull|up)"' "$FAKE_DOCKER_LOG"; then fail "the taken-over box ran compose pull/up: $(grep -E '"(pull|up)"' "$FAKE_DOCKER_LOG")"; fi
[ "$(sha256sum <"$ROOT2/var/lib/monky-deployd/state.json")" = "$LEGACY_SUM" ] || fail "state.json changed"
agent "$ROOT2" explain -n 1 >"$WORK/explain.txt" || fail "explain"
grep -q "took over a 0.1.x box: imported token from bao.token (source lease from state.json); applied sha ${FX_V2:0:12} from state.json; 2 release(s) as applied before" "$WORK/explain.txt" ||
  { cat "$WORK/explain.txt" >&2; fail "explain does not show what was imported"; }
echo "--- the first explain of the taken-over box:"; cat "$WORK/explain.txt"; echo "---"
ok "upgrade 0.1.9 -> $V1: imported, one heartbeat, no lease, no login, no pull/up, state.json untouched"

# --- 7. remove and purge of the taken-over box: nothing stopped, the deploy dir stays ------------------------
: >"$LOG"
"${DPKG2[@]}" -r monky-deployd >"$WORK/dpkg.log" 2>&1 || { cat "$WORK/dpkg.log" >&2; fail "dpkg -r (0.1.9 box)"; }
grep -q "Nothing converges the backend now" "$WORK/dpkg.log" || { cat "$WORK/dpkg.log" >&2; fail "remove does not say the backend is unmanaged"; }
# on a box state_dir is /var/lib/monky-deployd; the tick above ran under the test's root prefix
sed -i -e '/^state_dir:/d' -e '/^deploy_dir:/d' "$ROOT2/etc/monky-deployd/config.yaml"
"${DPKG2[@]}" -P monky-deployd >"$WORK/dpkg.log" 2>&1 || { cat "$WORK/dpkg.log" >&2; fail "dpkg -P (0.1.9 box)"; }
expect_calls "remove and purge of the taken-over box: only the agent's own units are stopped" \
  "systemctl is-enabled --quiet monky-deployd.timer" \
  "systemctl disable --now monky-deployd.timer" \
  "systemctl stop monky-deployd.service" \
  "systemctl disable --now monky-deployd-proxy.service" \
  "systemctl daemon-reload"
if grep -q '"down"' "$FAKE_DOCKER_LOG"; then fail "remove/purge ran compose down"; fi
S2="$ROOT2/var/lib/monky-deployd"
left="$(cd "$S2" && ls -A)"
[ "$left" = "$SIM_ENV" ] || fail "purge left in the state dir: $left"
[ -f "$S2/$SIM_ENV/current/compose.yaml" ] && [ -f "$S2/$SIM_ENV/current/.env" ] || fail "purge removed the compose project of running services"
[ ! -e "$ROOT2/etc/monky-deployd" ] || fail "purge left /etc/monky-deployd"
grep -q "cd /var/lib/monky-deployd/$SIM_ENV/current && sudo docker compose -p monky-$SIM_ENV down" "$WORK/dpkg.log" ||
  { cat "$WORK/dpkg.log" >&2; fail "purge does not say how to take the services down"; }
ok "purge: token, state file, state.json, docker config and config gone; the deploy dir left with how to take it down"

# --- 8. a fresh install with the defaults: env_id, site and the kit's files only --------------------------
DPKG3=(dpkg --root="$ROOT3" --force-not-root --force-script-chrootless --force-depends --log=/dev/null)
"${DPKG3[@]}" -i "$DEB1" >"$WORK/dpkg.log" 2>&1 || { cat "$WORK/dpkg.log" >&2; fail "dpkg -i $DEB1 (fresh)"; }
sim reveal --env "$SIM_ENV" --kit "$WORK/kit-c" --state-dir "$ROOT3/var/lib/monky-deployd" --docker-bin "$WORK/docker" >/dev/null
grep -v '^transport:' "$WORK/kit-c/config.yaml" >"$ROOT3/etc/monky-deployd/config.yaml"
sim desire --env "$SIM_ENV" --release v1 >/dev/null
: >"$FAKE_DOCKER_LOG"
agent "$ROOT3" run --once >"$WORK/tick.log" 2>&1 || { cat "$WORK/tick.log" >&2; fail "the fresh install's first tick"; }
V1_SHA="$(sim releases --env "$SIM_ENV" | jq -r '.[] | select(.name == "v1") | .sha')"
sim reports --env "$SIM_ENV" | tail -n 1 | jq -e --arg s "$V1_SHA" '.result == "applied" and .sha == $s' >/dev/null || fail "the fresh install did not apply v1"
[ -f "$ROOT3/var/lib/monky-deployd/$SIM_ENV/releases/$V1_SHA/.env" ] || fail "no release v1 on disk"
agent "$ROOT3" status >/dev/null || fail "status after the fresh install's apply"
ok "fresh install with the defaults (transport $("$ROOT3/usr/bin/monky-deployd" version --json | jq -r .default_transport)): applied v1"

echo "test-install: 10 passed, 0 failed"
