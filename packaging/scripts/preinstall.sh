#!/bin/sh
# monky-deployd preinst / rpm %pre: the system user the agent runs as.
#   dpkg: install [<old-version>] | upgrade <old-version> | abort-upgrade <new-version>
#   rpm : 1 (install) | 2 (upgrade)
# Idempotent: an existing user or group is left as it is.
set -e

case "${1:-}" in
  install | upgrade | 1 | 2) ;;
  *) exit 0 ;;
esac

if ! getent group monky-deployd >/dev/null; then
  groupadd --system monky-deployd
fi
if ! getent passwd monky-deployd >/dev/null; then
  useradd --system --gid monky-deployd --home-dir /var/lib/monky-deployd --no-create-home \
    --shell /usr/sbin/nologin --comment "Monky backend pull agent" monky-deployd
fi
exit 0
