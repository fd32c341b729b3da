#!/bin/sh
# monky-deployd prerm / rpm %preun.
# dpkg calls the OLD package's prerm on an UPGRADE as well as on a removal, and rpm passes the
# number of instances that will remain. Disabling the timer unconditionally stopped and disabled
# every upgraded agent, silently: the box stays up, the containers keep running and nothing says
# the check-ins have stopped (0.1.9, env-dev-01 and env-dev-08). Only a real removal stops it.
#   dpkg: remove | upgrade <new-version> | failed-upgrade <old-version> | deconfigure in-favour …
#   rpm : 0 (erase) | 1 (upgrade)
set -e

SYSTEMD_DIR="${MONKY_SYSTEMD_RUN_DIR:-/run/systemd/system}"

case "${1:-}" in
  remove | 0) ;;
  *) exit 0 ;; # upgrade, failed-upgrade, deconfigure, rpm 1, anything unknown: leave the units alone
esac

ROOT="${MONKY_ROOT:-${DPKG_ROOT:-}}"
# dpkg --purge removes the files before postrm purge runs, and prerm cannot tell a purge from a
# remove: the agent is kept aside so that postrm purge can revoke the box's OpenBao token
# (`monky-deployd purge`). postrm purge and the next postinst delete it.
if [ -x "$ROOT/usr/bin/monky-deployd" ] && [ -d "$ROOT/var/lib/monky-deployd" ]; then
  mkdir -p "$ROOT/var/lib/monky-deployd/.purge"
  chmod 0700 "$ROOT/var/lib/monky-deployd/.purge"
  cp "$ROOT/usr/bin/monky-deployd" "$ROOT/var/lib/monky-deployd/.purge/monky-deployd"
fi
if [ -d "$SYSTEMD_DIR" ]; then
  # remembered for a reinstall (postinst enables it again); purge forgets it (postrm)
  if systemctl is-enabled --quiet monky-deployd.timer 2>/dev/null && [ -d "$ROOT/var/lib/monky-deployd" ]; then
    : >"$ROOT/var/lib/monky-deployd/.timer-was-enabled" || true
  fi
  systemctl disable --now monky-deployd.timer || true
  systemctl stop monky-deployd.service || true
  systemctl disable --now monky-deployd-proxy.service || true
fi
exit 0
