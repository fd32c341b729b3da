#!/usr/bin/env bash
# Prints the path of the previous release's .deb, building it on first use: the tree of
# PREV_COMMIT (git archive, never a checkout of this worktree) built with its own `make deb`, as
# version PREV_VERSION. Kept outside the repository, keyed by the commit, so it is built once.
#   MONKY_SYSTEMD_CACHE   where prev-<commit>/ lives (default: $(go env GOCACHE)/../monky-systemd)
#   MONKY_PREV_COMMIT     the commit of the previous release (default: test/systemd/PREVIOUS's)
# test/systemd/PREVIOUS names the commit and the version of the previous release: a release moves
# it to the commit it was built from.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
read -r commit version < <(grep -v '^#' test/systemd/PREVIOUS | head -n 1)
commit="${MONKY_PREV_COMMIT:-$commit}"
commit="$(git rev-parse --verify "$commit^{commit}")"
cache="${MONKY_SYSTEMD_CACHE:-$(go env GOCACHE)/../monky-systemd}"
mkdir -p "$cache"
cache="$(cd "$cache" && pwd)"
out="$cache/prev-${commit:0:12}"
deb="$out/monky-deployd_${version}_amd64.deb"
if [ -f "$deb" ]; then
  echo "$deb"
  exit 0
fi
exec 9>"$cache/.prev.lock"
flock 9
if [ ! -f "$deb" ]; then
  src="$cache/.building-prev-${commit:0:12}"
  rm -rf "$src"
  mkdir -p "$src"
  git archive "$commit" | tar -x -C "$src"
  echo "previous release: make deb VERSION=$version from ${commit:0:12} (once)" >&2
  (cd "$src" && GOFLAGS=-buildvcs=false make -s deb VERSION="$version" COMMIT="${commit:0:12}" \
    SOURCE_DATE_EPOCH="$(git -C "$OLDPWD" log -1 --format=%ct "$commit")") >"$cache/prev-${commit:0:12}.log" 2>&1 ||
    { tail -n 30 "$cache/prev-${commit:0:12}.log" >&2; echo "previous release: make deb failed" >&2; exit 1; }
  mkdir -p "$out"
  cp "$src/dist/monky-deployd_${version}_amd64.deb" "$deb.tmp"
  mv "$deb.tmp" "$deb"
  rm -rf "$src"
fi
echo "$deb"
