#!/bin/sh
set -e
getent group monky-deployd >/dev/null || groupadd --system monky-deployd
getent passwd monky-deployd >/dev/null || useradd --system --gid monky-deployd --home-dir /var/lib/monky-deployd --no-create-home --shell /usr/sbin/nologin monky-deployd
exit 0
