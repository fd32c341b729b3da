#!/bin/sh
set -e
# 0.1.9's postinstall. One change for a test under `dpkg --root`: the venv check is prefixed
# with DPKG_ROOT (0.1.9 ran /opt/monky-deployd/venv/bin/python as is).
install -d -m 0700 -o monky-deployd -g monky-deployd "${DPKG_ROOT:-}/var/lib/monky-deployd"
install -d -m 0750 -o root -g monky-deployd "${DPKG_ROOT:-}/etc/monky-deployd"
# the agent drives docker compose: docker group membership (no root)
if getent group docker >/dev/null; then usermod -a -G docker monky-deployd || true; fi
if getent group ziti >/dev/null; then usermod -a -G ziti monky-deployd || true; fi
# the venv is relocatable only to the path it was built at; refuse a broken interpreter early
"${DPKG_ROOT:-}/opt/monky-deployd/venv/bin/python" -c 'import monky_deployd' || { echo "monky-deployd: venv unusable (python3 mismatch?)" >&2; exit 1; }
if [ -d "${MONKY_SYSTEMD_RUN_DIR:-/run/systemd/system}" ]; then
  systemctl daemon-reload || true
  # do NOT enable the timer here: install.sh / the ansible role do it after the config exists.
  systemctl try-restart monky-deployd-proxy.service 2>/dev/null || true
fi
exit 0
