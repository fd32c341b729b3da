#!/bin/sh
# monky-deployd postrm / rpm %postun.
#   dpkg: remove | purge | upgrade <new-version> | failed-upgrade <old-version> |
#         abort-install [<old-version>] | abort-upgrade <old-version> | disappear …
#   rpm : 0 (erase) | 1 (upgrade)
# Only `purge` deletes anything: the state dir (token, state, releases with their .env files).
# /etc/monky-deployd keeps the operator's config and is removed only when it is empty.
# The user is kept, so files it owns elsewhere keep a name.
set -e

ROOT="${MONKY_ROOT:-${DPKG_ROOT:-}}"
SYSTEMD_DIR="${MONKY_SYSTEMD_RUN_DIR:-/run/systemd/system}"

case "${1:-}" in
  remove | 0)
    if [ -d "$SYSTEMD_DIR" ]; then systemctl daemon-reload || true; fi
    ;;
  purge)
    rm -rf "$ROOT/var/lib/monky-deployd"
    rmdir "$ROOT/etc/monky-deployd" 2>/dev/null || true
    ;;
  *) ;;
esac
exit 0
