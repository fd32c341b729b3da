#!/bin/sh
set -e
# 0.1.9: purge deleted the whole state directory, compose project files included
if [ "${1:-}" = purge ]; then
  rm -rf "${DPKG_ROOT:-}/var/lib/monky-deployd"
fi
if [ -d "${MONKY_SYSTEMD_RUN_DIR:-/run/systemd/system}" ]; then systemctl daemon-reload || true; fi
exit 0
