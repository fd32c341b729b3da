#!/usr/bin/env bash
# Prints the path of a Debian bookworm rootfs with systemd as PID 1, building it on first use.
# Kept out of the repository, next to the Go build cache, keyed by what goes into it (suite,
# variant, package list, mirror), so a change to any of them builds a new one.
#   MONKY_SYSTEMD_CACHE   where rootfs-<key> lives (default: $(go env GOCACHE)/../monky-systemd)
#   DEBIAN_MIRROR         default: the first deb.debian.org-style URI apt is configured with
set -euo pipefail

SUITE=bookworm
VARIANT=minbase
# ansible-core needs python3-cffi-backend named: debootstrap resolves no virtual package (its
# python3-cryptography asks for python3-cffi-backend-api-min)
PACKAGES=systemd,systemd-sysv,dbus,ansible-core,python3-apt,python3-cffi-backend

mirror="${DEBIAN_MIRROR:-}"
if [ -z "$mirror" ]; then
  # the first main-archive URI in apt's sources (deb822 or one-line), not -security
  mirror="$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null |
    grep -oE 'https?://[^ ]+' | grep -v -e security -e snapshot | head -n1 || true)"
  mirror="${mirror:-http://deb.debian.org/debian}"
fi

cache="${MONKY_SYSTEMD_CACHE:-$(go env GOCACHE)/../monky-systemd}"
mkdir -p "$cache"
cache="$(cd "$cache" && pwd)"
key="$(printf '%s\n' "$SUITE" "$VARIANT" "$PACKAGES" "$mirror" | sha256sum | cut -c1-16)"
root="$cache/rootfs-$key"

if [ -f "$root/.complete" ]; then
  echo "$root"
  exit 0
fi

# one builder at a time; a half-built tree is never used (built aside, renamed when complete)
exec 9>"$cache/.lock"
flock 9
if [ ! -f "$root/.complete" ]; then
  tmp="$cache/.building-$key"
  rm -rf "$tmp"
  echo "rootfs: debootstrap --variant=$VARIANT --include=$PACKAGES $SUITE from $mirror (a few minutes, once)" >&2
  debootstrap --variant="$VARIANT" --include="$PACKAGES" "$SUITE" "$tmp" "$mirror" >"$cache/debootstrap-$key.log" 2>&1 ||
    { tail -n 30 "$cache/debootstrap-$key.log" >&2; echo "rootfs: debootstrap failed" >&2; exit 1; }
  # boot quietly and fast: no getty on the console, no network config to wait for
  rm -f "$tmp/etc/systemd/system/getty.target.wants/"* 2>/dev/null || true
  ln -sf /dev/null "$tmp/etc/systemd/system/console-getty.service"
  ln -sf /dev/null "$tmp/etc/systemd/system/systemd-networkd-wait-online.service"
  echo monky-box >"$tmp/etc/hostname"
  printf '%s\n' "$SUITE $VARIANT $PACKAGES $mirror" >"$tmp/.complete"
  rm -rf "$root"
  mv "$tmp" "$root"
fi
echo "$root"
