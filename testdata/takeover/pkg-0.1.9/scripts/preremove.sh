#!/bin/sh
set -e
# 0.1.9: dpkg calls the OLD package's prerm on an upgrade as well as on a removal
case "${1:-}" in
  upgrade | failed-upgrade | deconfigure | 1) exit 0 ;;
esac
if [ -d "${MONKY_SYSTEMD_RUN_DIR:-/run/systemd/system}" ]; then
  systemctl disable --now monky-deployd.timer 2>/dev/null || true
  systemctl disable --now monky-deployd-proxy.service 2>/dev/null || true
fi
exit 0
