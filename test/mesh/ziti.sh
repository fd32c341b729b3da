#!/usr/bin/env bash
# test/mesh/ziti.sh: the ziti binary (controller + router) for make mesh-e2e, built once from the
# vendored source tarball (third_party/openziti/ziti/ in ../shared; never downloaded) into a cache
# keyed by the tarball's sha256 (16 hex); prints the binary's path. A second run waits for the
# first one's build (flock) and finds it done. .ci/run starts it in the background at the start.
#
# Usage: test/mesh/ziti.sh [--tarball]   (--tarball: print the source tarball's path, build nothing)
# Env: ZITI_TARBALL  the vendored ziti source (default: third_party/openziti/ziti/ in ../shared)
#      MESH_CACHE    where the build is cached (default: $(go env GOCACHE)/../monky-ziti)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
ROOT=$(pwd)
die() {
	echo "mesh-e2e: $*" >&2
	exit 1
}

# find_tarball: third_party/openziti/ziti/ in a folder named shared beside the checkout or beside
# any folder above it (a clone made elsewhere under the same tree finds it too)
find_tarball() {
	local d=$ROOT f
	while :; do
		f=$(compgen -G "$d/shared/third_party/openziti/ziti/ziti-*-vendored.tar.gz" | head -n 1 || true)
		[[ -n "$f" ]] && { echo "$f"; return 0; }
		[[ "$d" == / ]] && return 1
		d=$(dirname "$d")
	done
}
# build TARBALL DIR: the README's offline build (third_party/openziti/README.md), into DIR/bin/ziti
build() {
	local tarball=$1 dir=$2 t0
	t0=$(date +%s)
	echo "mesh-e2e: building ziti from $(basename "$tarball") into $dir (once per tarball; 10-15 min of CPU cold)" >&2
	rm -rf "$dir/ziti" "$dir/bin/ziti.tmp"
	mkdir -p "$dir/bin"
	tar -xzf "$tarball" -C "$dir" || die "$tarball does not unpack"
	(cd "$dir/ziti" && GOPROXY=off GOFLAGS="-mod=vendor -buildvcs=false" GOPRIVATE=github.com/openziti \
		GONOSUMDB=github.com/openziti CGO_ENABLED=0 nice go build -trimpath -ldflags "-s -w" \
		-modfile=go.local.mod -o "$dir/bin/ziti.tmp" ./ziti) >"$dir/build.log" 2>&1 ||
		{
			tail -20 "$dir/build.log" >&2
			die "the ziti build failed (log: $dir/build.log)"
		}
	mv "$dir/bin/ziti.tmp" "$dir/bin/ziti"
	rm -rf "$dir/ziti" # the unpacked source: only the binary is kept
	echo "done in $(($(date +%s) - t0)) s" >>"$dir/build.log"
	echo "mesh-e2e: ziti built in $(($(date +%s) - t0)) s" >&2
}

TARBALL=${ZITI_TARBALL:-$(find_tarball)} || die "no ziti source tarball (third_party/openziti/ziti/ in a folder named shared beside the checkout or above it); set ZITI_TARBALL or ZITI"
[[ -f "$TARBALL" ]] || die "ZITI_TARBALL $TARBALL is not a file"
if [[ "${1:-}" == --tarball ]]; then
	echo "$TARBALL" # only where the source is
	exit 0
fi
KEY=$(sha256sum "$TARBALL" | cut -c1-16)
CACHE=$(realpath -m "${MESH_CACHE:-$(go env GOCACHE)/../monky-ziti}")
ZITI=$CACHE/$KEY/bin/ziti
if [[ ! -x "$ZITI" ]]; then
	mkdir -p "$CACHE/$KEY"
	exec 9>"$CACHE/$KEY.lock"
	flock 9
	[[ -x "$ZITI" ]] || build "$TARBALL" "$CACHE/$KEY"
	flock -u 9
	exec 9>&-
fi
echo "$ZITI"
