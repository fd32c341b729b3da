#!/usr/bin/env bash
# monky-deployd installer: one script an operator runs on a docker VM or laptop, from the install kit.
#
#   T=<read-only deploy token, scope read_package_registry>      # from the install kit
#   curl -sSf -H "DEPLOY-TOKEN: $T" "$BASE/$VER/install.sh" | sudo MONKY_DEPLOYD_TOKEN="$T" bash -s -- \
#     --env env-qa-02 --site cbs --bootstrap-file bootstrap.jwt --enrol-jwt ./monky-host.env-qa-02.jwt \
#     [--transport sdk|proxy|system] [--version X.Y.Z] [--laptop] [--bao-ca openbao-ca.pem] \
#     [--docker-data-root /home/docker-data] [--source gitlab|gitea] [--token T]
#
# What it does, in order: Docker Engine when absent (Docker's apt suite, falling back to Debian/Ubuntu
# docker.io), ziti-edge-tunnel when absent, the pinned .deb checked against its .sha256, the host
# identity enrolled when missing, the transport (the package's default unless --transport), the
# tunneller in run mode for transport system or run-host for sdk and proxy, monky-deployd in the `ziti` group
# plus explicit and default ACLs on the identity, /etc/monky-deployd/config.yaml, the bootstrap grant
# staged 0600, the timer enabled, one tick, the enrolment JWT deleted.
#
# Lessons kept (CHANGELOG 0.1.1–0.1.9):
# - The download token goes to curl through a 0600 `-K` file: never argv, never a log, never xtrace.
#   Prefer MONKY_DEPLOYD_TOKEN over --token (argv of this script is visible in `ps`).
# - /etc/os-release is read in a subshell: sourcing it inline overwrote VERSION and downloaded
#   "monky-deployd_26.04 LTS (Resolute Raccoon)_amd64.deb". Script variables are DEPLOYD_*.
# - When the script is piped, stdin IS the script: the grant comes from --bootstrap-file
#   (`--bootstrap-file -` reads stdin explicitly when the script is run from a file).
# - A tunneller that does not start is a WARNING until everything else is installed, then an error
#   at the end: a re-run needs no new kit (env-qa-02: the unit failed with 203/EXEC and `set -e`
#   aborted the install before config, ACLs, grant and timer existed).
# - tenancy's intercept port is 443, never the in-pod 8081.
# - The identity read survives a tunneller rewrite through the `ziti` group (env-dev-08).
#
# MONKY_ROOT prefixes every path this script writes or reads (/etc, /var/lib, /opt) — for tests only.
set -euo pipefail
{ set +x; } 2>/dev/null
umask 077

DEFAULT_VERSION="1.0.0"
ROOT="${MONKY_ROOT:-}"

# --- download locations (override with --base-url / MONKY_DEPLOYD_BASE_URL) -------------------------
GITLAB_BASE_URL="https://scm.tikali.ai/api/v4/projects/69/packages/generic/monky-deployd"
GITEA_BASE_URL="https://gitea.cbs.tikali.net/mdella/monky-deployd/releases/download"
DOCKER_APT_URL="${MONKY_DOCKER_APT_URL:-https://download.docker.com/linux}"
OPENZITI_APT_URL="${MONKY_OPENZITI_APT_URL:-https://packages.openziti.org/zitipax-openziti-deb-stable}"
OPENZITI_KEY_URL="${MONKY_OPENZITI_KEY_URL:-https://get.openziti.io/tun/package-repos.gpg}"
IDENTITY_DIR_ABS="/opt/openziti/etc/identities"

# --- arguments ---------------------------------------------------------------------------------------
DEPLOYD_ENV=""
DEPLOYD_SITE=""
DEPLOYD_VERSION="${MONKY_DEPLOYD_VERSION:-$DEFAULT_VERSION}"
DEPLOYD_TRANSPORT=""
DEPLOYD_LAPTOP=false
DEPLOYD_BAO_CA=""
DEPLOYD_DOCKER_DATA_ROOT=""
DEPLOYD_SOURCE="${MONKY_DEPLOYD_SOURCE:-gitlab}"
DEPLOYD_BASE_URL="${MONKY_DEPLOYD_BASE_URL:-}"
DEPLOYD_TOKEN="${MONKY_DEPLOYD_TOKEN:-}"
DEPLOYD_BOOTSTRAP_FILE=""
DEPLOYD_ENROL_JWT=""
unset MONKY_DEPLOYD_TOKEN # no child process inherits it

die() { echo "install.sh: error: $*" >&2; exit 1; }
warn() { echo "install.sh: WARNING: $*" >&2; }
say() { echo "install.sh: $*"; }

usage() {
  sed -n '2,9p' "$0" 2>/dev/null || true
  exit "${1:-0}"
}

need_arg() { [ "$#" -ge 2 ] && [ -n "$2" ] || die "$1 needs a value"; }

while [ "$#" -gt 0 ]; do
  case "$1" in
    --env) need_arg "$@"; DEPLOYD_ENV="$2"; shift 2 ;;
    --site) need_arg "$@"; DEPLOYD_SITE="$2"; shift 2 ;;
    --version) need_arg "$@"; DEPLOYD_VERSION="$2"; shift 2 ;;
    --transport) need_arg "$@"; DEPLOYD_TRANSPORT="$2"; shift 2 ;;
    --laptop) DEPLOYD_LAPTOP=true; shift ;;
    --bao-ca) need_arg "$@"; DEPLOYD_BAO_CA="$2"; shift 2 ;;
    --docker-data-root) need_arg "$@"; DEPLOYD_DOCKER_DATA_ROOT="$2"; shift 2 ;;
    --source) need_arg "$@"; DEPLOYD_SOURCE="$2"; shift 2 ;;
    --base-url) need_arg "$@"; DEPLOYD_BASE_URL="$2"; shift 2 ;;
    --token) need_arg "$@"; DEPLOYD_TOKEN="$2"; shift 2 ;;
    --bootstrap-file) need_arg "$@"; DEPLOYD_BOOTSTRAP_FILE="$2"; shift 2 ;;
    --enrol-jwt | --enroll-jwt) need_arg "$@"; DEPLOYD_ENROL_JWT="$2"; shift 2 ;;
    -h | --help) usage 0 ;;
    *) die "unknown argument: $1 (see --help)" ;;
  esac
done

[ -n "$DEPLOYD_ENV" ] || die "--env is required (env-<tier>-<nn>)"
[ -n "$DEPLOYD_SITE" ] || die "--site is required"
[[ "$DEPLOYD_ENV" =~ ^env-[a-z0-9]+-[0-9]+$ ]] || die "--env must look like env-<tier>-<nn>, got: $DEPLOYD_ENV"
[[ "$DEPLOYD_SITE" =~ ^[a-z0-9][a-z0-9-]*$ ]] || die "--site must be a lower-case name, got: $DEPLOYD_SITE"
[[ "$DEPLOYD_VERSION" =~ ^[0-9]+\.[0-9]+\.[0-9]+([.~+-][0-9A-Za-z.~+-]+)?$ ]] || die "--version must be X.Y.Z, got: $DEPLOYD_VERSION"
# --transport given: checked against the package's transports once it is installed. Not given: the
# package's default (`monky-deployd version --json`: system without the OpenZiti SDK, sdk with it).
TRANSPORT_CHOSEN_BY="--transport"
if [ -z "$DEPLOYD_TRANSPORT" ] && [ "$DEPLOYD_LAPTOP" = true ]; then
  DEPLOYD_TRANSPORT=system
  TRANSPORT_CHOSEN_BY="--laptop"
fi
case "$DEPLOYD_TRANSPORT" in "" | sdk | proxy | system) ;; *) die "--transport must be sdk, proxy or system" ;; esac
if [ -z "$DEPLOYD_BASE_URL" ]; then
  case "$DEPLOYD_SOURCE" in
    gitlab) DEPLOYD_BASE_URL="$GITLAB_BASE_URL/$DEPLOYD_VERSION" ;;
    gitea) DEPLOYD_BASE_URL="$GITEA_BASE_URL/v$DEPLOYD_VERSION" ;;
    *) die "--source must be gitlab or gitea" ;;
  esac
fi
[ "$(id -u)" = 0 ] || die "run as root (sudo)"

ETC="$ROOT/etc/monky-deployd"
STATE_DIR="$ROOT/var/lib/monky-deployd"
IDENTITY_ABS="$IDENTITY_DIR_ABS/monky-host.$DEPLOYD_ENV.json"
IDENTITY="$ROOT$IDENTITY_ABS"
IDENTITY_DIR="$ROOT$IDENTITY_DIR_ABS"
DEB_NAME="monky-deployd_${DEPLOYD_VERSION}_amd64.deb"

WORK="$(mktemp -d "${TMPDIR:-/tmp}/monky-deployd-install.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
CURL_CFG="$WORK/curl.cfg"

# The token reaches curl only through this 0600 file (printf is a builtin: no argv).
: >"$CURL_CFG"
chmod 0600 "$CURL_CFG"
if [ -n "$DEPLOYD_TOKEN" ]; then
  printf 'header = "DEPLOY-TOKEN: %s"\n' "$DEPLOYD_TOKEN" >>"$CURL_CFG"
fi

# download URL OUT: a release artefact, with the deploy token when there is one
download() { curl -fsSL --retry 3 -K "$CURL_CFG" -o "$2" "$1"; }

# /etc/os-release in a subshell: it defines VERSION, ID and more that must not leak in here
OS_ID="$( (. "$ROOT/etc/os-release" && echo "${ID:-}") 2>/dev/null || true)"
OS_CODENAME="$( (. "$ROOT/etc/os-release" && echo "${VERSION_CODENAME:-${UBUNTU_CODENAME:-}}") 2>/dev/null || true)"

export DEBIAN_FRONTEND=noninteractive
APT_UPDATED=false
apt_update() { if [ "$APT_UPDATED" = false ]; then apt-get update -q; APT_UPDATED=true; fi; }

# write_file PATH MODE OWNER:GROUP: stdin to PATH, replaced atomically
write_file() {
  local dst="$1" mode="$2" owner="$3" tmp
  mkdir -p "$(dirname "$dst")"
  tmp="$(dirname "$dst")/.$(basename "$dst").tmp.$$"
  cat >"$tmp"
  chmod "$mode" "$tmp"
  chown "$owner" "$tmp"
  sync "$tmp" 2>/dev/null || true
  mv -f "$tmp" "$dst"
  sync "$(dirname "$dst")" 2>/dev/null || true
}

# --- 1. prerequisites: curl/acl, Docker Engine, ziti-edge-tunnel ---------------------------------------
if ! command -v setfacl >/dev/null 2>&1; then
  apt_update
  apt-get install -y -q acl ca-certificates curl
fi

if ! command -v docker >/dev/null 2>&1; then
  say "Docker Engine is absent: installing it"
  if [ -n "$DEPLOYD_DOCKER_DATA_ROOT" ]; then
    # placed before the first start, so no image ever lands on the default root
    mkdir -p "$ROOT/etc/docker"
    printf '{\n  "data-root": "%s"\n}\n' "$DEPLOYD_DOCKER_DATA_ROOT" | write_file "$ROOT/etc/docker/daemon.json" 0644 root:root
  fi
  apt_update
  docker_suite_ok=false
  if [ -n "$OS_ID" ] && [ -n "$OS_CODENAME" ]; then
    mkdir -p "$ROOT/etc/apt/keyrings"
    if curl -fsSL --retry 3 -o "$WORK/docker.asc" "$DOCKER_APT_URL/$OS_ID/gpg"; then
      write_file "$ROOT/etc/apt/keyrings/docker.asc" 0644 root:root <"$WORK/docker.asc"
      echo "deb [arch=amd64 signed-by=/etc/apt/keyrings/docker.asc] $DOCKER_APT_URL/$OS_ID $OS_CODENAME stable" |
        write_file "$ROOT/etc/apt/sources.list.d/docker.list" 0644 root:root
      apt-get update -q
      if apt-get install -y -q docker-ce docker-ce-cli containerd.io docker-buildx-plugin docker-compose-plugin; then
        docker_suite_ok=true
      fi
    fi
  fi
  if [ "$docker_suite_ok" = false ]; then
    warn "Docker's apt suite for ${OS_ID:-?}/${OS_CODENAME:-?} did not work: installing the distribution's docker.io"
    rm -f "$ROOT/etc/apt/sources.list.d/docker.list"
    apt-get update -q
    apt-get install -y -q docker.io
    apt-get install -y -q docker-compose-v2 || apt-get install -y -q docker-compose-plugin || warn "no compose plugin package found"
  fi
elif ! docker compose version >/dev/null 2>&1; then
  say "docker compose plugin is absent: installing it"
  apt_update
  apt-get install -y -q docker-compose-plugin || apt-get install -y -q docker-compose-v2
elif [ -n "$DEPLOYD_DOCKER_DATA_ROOT" ]; then
  warn "Docker is already installed: --docker-data-root is ignored (an existing Docker is left untouched)"
fi

if ! command -v ziti-edge-tunnel >/dev/null 2>&1 || { [ "$DEPLOYD_TRANSPORT" = proxy ] && ! command -v ziti >/dev/null 2>&1; }; then
  say "installing the OpenZiti packages"
  curl -fsSL --retry 3 -o "$WORK/openziti.gpg" "$OPENZITI_KEY_URL"
  mkdir -p "$ROOT/usr/share/keyrings"
  gpg --dearmor --yes -o "$WORK/openziti.keyring" "$WORK/openziti.gpg" 2>/dev/null || cp "$WORK/openziti.gpg" "$WORK/openziti.keyring"
  write_file "$ROOT/usr/share/keyrings/openziti.gpg" 0644 root:root <"$WORK/openziti.keyring"
  echo "deb [signed-by=/usr/share/keyrings/openziti.gpg] $OPENZITI_APT_URL debian main" |
    write_file "$ROOT/etc/apt/sources.list.d/openziti.list" 0644 root:root
  apt-get update -q
  APT_UPDATED=true
  command -v ziti-edge-tunnel >/dev/null 2>&1 || apt-get install -y -q ziti-edge-tunnel
  if [ "$DEPLOYD_TRANSPORT" = proxy ]; then command -v ziti >/dev/null 2>&1 || apt-get install -y -q openziti; fi
fi

# --- 2. the package ------------------------------------------------------------------------------------
say "downloading $DEB_NAME from $DEPLOYD_BASE_URL"
download "$DEPLOYD_BASE_URL/$DEB_NAME" "$WORK/$DEB_NAME"
download "$DEPLOYD_BASE_URL/$DEB_NAME.sha256" "$WORK/$DEB_NAME.sha256"
want_sha="$(awk 'NR==1 {print $1}' "$WORK/$DEB_NAME.sha256")"
have_sha="$(sha256sum "$WORK/$DEB_NAME" | awk '{print $1}')"
[[ "$want_sha" =~ ^[0-9a-f]{64}$ ]] || die "$DEB_NAME.sha256 does not hold a sha256"
[ "$want_sha" = "$have_sha" ] || die "$DEB_NAME does not match its .sha256 (want $want_sha, got $have_sha): not installed"
dpkg -i "$WORK/$DEB_NAME"

# the transports this package was built with, and its default
VERSION_JSON="$(monky-deployd version --json 2>/dev/null | tr -d ' \n' || true)"
BUILT_IN="$(printf '%s' "$VERSION_JSON" | sed -n 's/.*"transports":\[\([^]]*\)\].*/\1/p' | tr -d '"' | tr ',' ' ')"
BUILD_DEFAULT="$(printf '%s' "$VERSION_JSON" | sed -n 's/.*"default_transport":"\([a-z]*\)".*/\1/p')"
[ -n "$BUILD_DEFAULT" ] || die "monky-deployd version --json did not name a default transport: the package is broken"
if [ -z "$DEPLOYD_TRANSPORT" ]; then
  DEPLOYD_TRANSPORT="$BUILD_DEFAULT"
  TRANSPORT_CHOSEN_BY="the package's default"
fi
case " $BUILT_IN " in
  *" $DEPLOYD_TRANSPORT "*) ;;
  *) die "transport $DEPLOYD_TRANSPORT is not built into monky-deployd $DEPLOYD_VERSION (it has: $BUILT_IN); choose one of those with --transport" ;;
esac
say "transport: $DEPLOYD_TRANSPORT ($TRANSPORT_CHOSEN_BY; this package has: $BUILT_IN)"

# --- 3. the host identity and the tunneller ------------------------------------------------------------
TUNNEL_FAILED=false
ENROLLED=false
if [ ! -s "$IDENTITY" ]; then
  [ -n "$DEPLOYD_ENROL_JWT" ] || die "identity $IDENTITY_ABS is missing and no --enrol-jwt was given"
  [ -r "$DEPLOYD_ENROL_JWT" ] || die "enrolment JWT $DEPLOYD_ENROL_JWT is not readable"
  mkdir -p "$IDENTITY_DIR"
  ziti-edge-tunnel enroll --jwt "$DEPLOYD_ENROL_JWT" --identity "$IDENTITY"
  ENROLLED=true
fi
chown ziti:ziti "$IDENTITY" 2>/dev/null || true
chmod 0640 "$IDENTITY"

if [ "$DEPLOYD_LAPTOP" = false ]; then
  # The tunneller's mode follows the transport. sdk and proxy dial with the identity themselves:
  # run-host (the box hosts nothing and intercepts nothing). system dials plain DNS/TCP: the
  # tunneller intercepts (run: tun + DNS). The package's ExecStartPre is not executable by user ziti
  # on some versions (203/EXEC) and the identity is enrolled above, so it is cleared in both.
  DROPIN_DIR="$ROOT/etc/systemd/system/ziti-edge-tunnel.service.d"
  mkdir -p "$DROPIN_DIR"
  if [ "$DEPLOYD_TRANSPORT" = system ]; then
    rm -f "$DROPIN_DIR/run-host.conf"
    write_file "$DROPIN_DIR/run.conf" 0644 root:root <<EOF
# written by monky-deployd install.sh (transport system: the tunneller intercepts)
[Service]
ExecStartPre=
ExecStart=
ExecStart=/opt/openziti/bin/ziti-edge-tunnel run --identity-dir=$IDENTITY_DIR_ABS
EOF
  else
    rm -f "$DROPIN_DIR/run.conf"
    write_file "$DROPIN_DIR/run-host.conf" 0644 root:root <<EOF
# written by monky-deployd install.sh (transport $DEPLOYD_TRANSPORT: the agent dials with the identity)
[Service]
ExecStartPre=
ExecStart=
ExecStart=/opt/openziti/bin/ziti-edge-tunnel run-host --identity-dir=$IDENTITY_DIR_ABS
EOF
  fi
fi
systemctl daemon-reload
if ! systemctl enable ziti-edge-tunnel.service || ! systemctl restart ziti-edge-tunnel.service; then
  TUNNEL_FAILED=true
  warn "ziti-edge-tunnel did not start; finishing the rest of the install first (journalctl -u ziti-edge-tunnel)"
fi

# --- 4. groups, ACLs, config, bootstrap grant ----------------------------------------------------------
install -d -m 0750 -o root -g monky-deployd "$ETC"
install -d -m 0700 -o monky-deployd -g monky-deployd "$STATE_DIR"
if getent group docker >/dev/null; then usermod -a -G docker monky-deployd; fi
# The group is the grant that survives ziti-edge-tunnel rewriting the identity (the rewrite drops
# ACLs). The explicit ACLs cover hosts where the file has another group; the default ACL carries the
# grant onto a freshly written identity file.
if getent group ziti >/dev/null; then usermod -a -G ziti monky-deployd; fi
setfacl -m u:monky-deployd:r "$IDENTITY"
setfacl -m u:monky-deployd:rx "$IDENTITY_DIR"
setfacl -d -m u:monky-deployd:r "$IDENTITY_DIR"
setfacl -m u:monky-deployd:x "$ROOT/opt/openziti/etc" 2>/dev/null || true

BAO_CA_LINE=""
if [ -n "$DEPLOYD_BAO_CA" ]; then
  [ -r "$DEPLOYD_BAO_CA" ] || die "--bao-ca $DEPLOYD_BAO_CA is not readable"
  write_file "$ETC/openbao-ca.pem" 0644 root:root <"$DEPLOYD_BAO_CA"
  BAO_CA_LINE="  ca_file: /etc/monky-deployd/openbao-ca.pem"
fi
BAO_ADDR="${MONKY_DEPLOYD_BAO_ADDR:-https://bao.$DEPLOYD_SITE.tikali.net:8200}"

{
  echo "# /etc/monky-deployd/config.yaml — written by install.sh for monky-deployd $DEPLOYD_VERSION"
  echo "# Keys and defaults: /usr/share/doc/monky-deployd/config.example.yaml"
  echo "env_id: $DEPLOYD_ENV"
  echo "site: $DEPLOYD_SITE"
  echo "transport: $DEPLOYD_TRANSPORT"
  echo "identity: $IDENTITY_ABS"
  echo "tenancy:"
  echo "  service: monky.tenancy.deploy"
  echo "  port: 443   # the intercept port of monky.tenancy.deploy, not the pod's listener"
  echo "bao:"
  echo "  addr: $BAO_ADDR"
  [ -z "$BAO_CA_LINE" ] || echo "$BAO_CA_LINE"
  echo "laptop_mode: $DEPLOYD_LAPTOP"
  echo "metrics_path: /var/lib/prometheus/node-exporter/monky_deployd.prom   # node_exporter's textfile collector"
} >"$WORK/config.yaml"
# checked by the installed agent before it replaces anything: every problem, one line each
monky-deployd check config "$WORK/config.yaml" >&2 || die "the config this installer wrote does not check (above); nothing was replaced"
write_file "$ETC/config.yaml" 0640 root:monky-deployd <"$WORK/config.yaml"

if [ "$DEPLOYD_TRANSPORT" = proxy ]; then
  echo "MONKY_DEPLOYD_IDENTITY=$IDENTITY_ABS" | write_file "$ETC/proxy.env" 0644 root:root
fi

if [ -n "$DEPLOYD_BOOTSTRAP_FILE" ]; then
  if [ "$DEPLOYD_BOOTSTRAP_FILE" = - ]; then
    [ ! -t 0 ] || die "--bootstrap-file - reads the grant from stdin, which is a terminal"
    cat >"$WORK/bootstrap.jwt"
  else
    [ -r "$DEPLOYD_BOOTSTRAP_FILE" ] || die "--bootstrap-file $DEPLOYD_BOOTSTRAP_FILE is not readable"
    cat <"$DEPLOYD_BOOTSTRAP_FILE" >"$WORK/bootstrap.jwt"
  fi
  [ -s "$WORK/bootstrap.jwt" ] || die "the bootstrap grant is empty"
  # owned by the agent: it consumes the grant (truncates it) after the first login
  write_file "$ETC/bootstrap.jwt" 0600 monky-deployd:monky-deployd <"$WORK/bootstrap.jwt"
elif [ ! -s "$STATE_DIR/bao.token" ] && [ ! -s "$ETC/bootstrap.jwt" ]; then
  warn "no bootstrap grant (--bootstrap-file) and no token yet: the agent cannot log in until one is staged"
fi

# --- 5. timer, proxy, one tick --------------------------------------------------------------------------
systemctl daemon-reload
if [ "$DEPLOYD_TRANSPORT" = proxy ]; then
  if ! systemctl enable --now monky-deployd-proxy.service; then
    TUNNEL_FAILED=true
    warn "monky-deployd-proxy.service did not start (journalctl -u monky-deployd-proxy)"
  fi
fi
systemctl enable --now monky-deployd.timer

TICK_FAILED=false
if [ "$TUNNEL_FAILED" = false ]; then
  say "running one tick (journalctl -u monky-deployd -f to follow)"
  systemctl start monky-deployd.service || TICK_FAILED=true
fi

if [ "$ENROLLED" = true ] && [ -n "$DEPLOYD_ENROL_JWT" ]; then
  rm -f "$DEPLOYD_ENROL_JWT" # single-use and now spent: the identity holds the key
fi

if [ "$TUNNEL_FAILED" = true ]; then
  die "everything is installed but the mesh is not up: fix ziti-edge-tunnel (journalctl -u ziti-edge-tunnel), then re-run this command — no new kit is needed"
fi
if [ "$TICK_FAILED" = true ]; then
  die "installed, but the first tick failed: journalctl -u monky-deployd -n 50 (the timer keeps trying every minute)"
fi
say "monky-deployd $DEPLOYD_VERSION installed for $DEPLOYD_ENV (transport $DEPLOYD_TRANSPORT); the timer ticks every minute"
