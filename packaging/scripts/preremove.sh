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
ROOT="${MONKY_ROOT:-${DPKG_ROOT:-}}"

# A downgrade: dpkg runs this (the newer package's) prerm with `upgrade <older-version>`. The
# unit lets the agent write node_exporter's textfile directory (metrics_path) from 1.0.0 on; an
# older unit (0.1.x, a 1.0.0~<commit> build) does not, so its ticks' metrics write is refused
# (read-only file system), the textfile freezes and TicksStopped pages for a box that ticks. This
# drop-in, owned by no package, gives the older unit the path; postinst removes it again when a
# package whose own unit has the path is configured (docs/OPERATIONS.md, "Upgrading").
METRICS_DROPIN=/etc/systemd/system/monky-deployd.service.d/monky-deployd-metrics.conf
if [ "${1:-}" = upgrade ] && [ -n "${2:-}" ] && dpkg --compare-versions "$2" lt 1.0.0; then
  mkdir -p "$ROOT${METRICS_DROPIN%/*}"
  printf '%s\n' "# monky-deployd's prerm, on the downgrade to $2: that release's unit does not let the agent" \
    "# write the metrics textfile directory. Removed when monky-deployd 1.0.0 or later is installed." \
    "[Service]" "ReadWritePaths=-/var/lib/prometheus/node-exporter" >"$ROOT$METRICS_DROPIN"
  echo "monky-deployd: downgrade to $2: $METRICS_DROPIN keeps /var/lib/prometheus/node-exporter writable for its unit (metrics_path);" >&2
  echo "monky-deployd:   installing 1.0.0 or later again removes it" >&2
fi

case "${1:-}" in
  remove | 0) ;;
  *) exit 0 ;; # upgrade, failed-upgrade, deconfigure, rpm 1, anything unknown: leave the units alone
esac

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
