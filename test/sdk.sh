#!/usr/bin/env bash
# make sdk-test's last step: the binary `make sdk` writes, against the simulator.
#
#   1. transport: proxy (the SDK linked but unused): desire v1 → apply (exit 0), then a heartbeat
#   2. transport: sdk with a damaged identity (its key is not a key; then group-writable):
#      every tick exits 1 with TRANSPORT_IDENTITY and its fix, never a panic; explain names it
#   3. check config accepts `transport: sdk` in this build
#
# Usage: test/sdk.sh [BIN]   BIN defaults to bin/monky-deployd-sdk. The simulator is bin/monky-sim,
# built into the temporary directory when it is missing. Docker is the recording stub. Nothing
# keeps running and the temporary directory is removed at the end.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$(pwd)
ENV_ID=env-demo-01
AGENT_BIN=$(realpath "${1:-bin/monky-deployd-sdk}")
if [[ ! -x "$AGENT_BIN" ]]; then
	echo "sdk.sh: $AGENT_BIN is missing (run make sdk)" >&2
	exit 1
fi
WORK=$(mktemp -d "${TMPDIR:-/tmp}/monky-sdk.XXXXXX")
# shellcheck source=test/sim.sh
source test/sim.sh

SIM_BIN=$ROOT/bin/monky-sim
if [[ ! -x "$SIM_BIN" ]]; then
	SIM_BIN=$WORK/monky-sim
	CGO_ENABLED=0 go build -o "$SIM_BIN" ./cmd/monky-sim
fi
mkdir -p "$WORK/bin" "$WORK/docker-state"
go build -o "$WORK/bin/fakedocker" ./test/fakedocker
printf '#!/bin/sh\nFAKE_DOCKER_LOG=%q FAKE_DOCKER_STATE=%q exec %q "$@"\n' \
	"$WORK/docker-calls.jsonl" "$WORK/docker-state" "$WORK/bin/fakedocker" >"$WORK/bin/docker"
chmod 0755 "$WORK/bin/docker"

"$SIM_BIN" serve --releases testdata/demo --env "$ENV_ID" --kit "$WORK/kit" \
	--addr-file "$WORK/addr.json" --state-dir "$WORK/sim-state" --docker-bin "$WORK/bin/docker" \
	--quiet >"$WORK/sim.log" 2>&1 &
SIM_PID=$!
wait_sim "$WORK/addr.json" "$WORK/sim.log" || exit 1
sim() { "$SIM_BIN" "$1" --addr-file "$WORK/addr.json" --env "$ENV_ID" "${@:2}"; }

FAILED=()
fail() {
	echo "FAIL: $*"
	FAILED+=("$*")
}

# the kit's config with transport proxy: each intercept host:port sent to itself
KIT=$WORK/kit/config.yaml
tenancy_url=$(sed -n 's/^  base_url: "\(.*\)"$/\1/p' "$KIT")
bao_url=$(sed -n 's/^  addr: "\(.*\)"$/\1/p' "$KIT")
# a ziti identity (a self-signed certificate is its own CA) whose key is the file KEY's text
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=monky-host.$ENV_ID \
	-days 1 -keyout "$WORK/key.pem" -out "$WORK/cert.pem" 2>/dev/null
pem() { awk '{printf "%s\\n", $0}' "$1"; }
identity_json() { # KEY
	printf '{"ztAPI": "https://ctrl.ziti.example:1280", "id": {"cert": "pem:%s", "key": "pem:%s", "ca": "pem:%s"}}\n' \
		"$(pem "$WORK/cert.pem")" "$(pem "$1")" "$(pem "$WORK/cert.pem")" >"$WORK/identity.json"
}
identity_json "$WORK/key.pem"
chmod 0640 "$WORK/identity.json"
with_transport() { # TRANSPORT OUT
	sed -e "s|^transport: system$|transport: $1\nidentity: \"$WORK/identity.json\"|" \
		-e "s|^  base_url: .*|&\n  proxy_addr: \"${tenancy_url#http://}\"\n  service: monky.tenancy.deploy|" \
		-e "s|^  addr: .*|&\n  proxy_addr: \"${bao_url#http://}\"\n  service: openbao|" "$KIT" >"$2"
}
with_transport proxy "$WORK/proxy.yaml"
with_transport sdk "$WORK/sdk.yaml"

agent() { "$AGENT_BIN" --config "$1" "${@:2}"; }

# tick CONFIG WANT: one `run --once`; its stderr in $WORK/tick.log
tick() {
	local rc=0
	agent "$1" run --once 2>"$WORK/tick.log" || rc=$?
	if [[ "$rc" -ne "$2" ]]; then
		fail "run --once with $(basename "$1"): exit $rc, want $2"
		sed 's/^/  | /' "$WORK/tick.log"
	fi
	if grep -qE '^panic:|^goroutine [0-9]+ \[' "$WORK/tick.log"; then
		fail "run --once with $(basename "$1") panicked"
		sed 's/^/  | /' "$WORK/tick.log"
	fi
}

echo "== $("$AGENT_BIN" version | grep transports)"
"$AGENT_BIN" version | grep -q '^transports: sdk, proxy, system' || fail "version does not list sdk"

echo "== transport proxy: apply v1, then a heartbeat"
sim desire --release v1
tick "$WORK/proxy.yaml" 0
tick "$WORK/proxy.yaml" 0
agent "$WORK/proxy.yaml" explain -n 2 | tee "$WORK/explain.txt" | sed 's/^/  /'
[[ "$(sim counts)" == *checkin* ]] || fail "tenancy saw no check-in: $(sim counts)"

echo "== transport sdk, the identity's key is not a key"
echo "this is not a key" >"$WORK/not-a-key.pem"
identity_json "$WORK/not-a-key.pem"
tick "$WORK/sdk.yaml" 1
sed 's/^/  | /' "$WORK/tick.log"
grep -q 'TRANSPORT_IDENTITY' "$WORK/tick.log" || fail "the refused tick does not name TRANSPORT_IDENTITY"
grep -q 'id.key' "$WORK/tick.log" || fail "the refused tick does not name id.key"
agent "$WORK/sdk.yaml" explain -n 1 >"$WORK/explain.txt" 2>&1 || true
sed 's/^/  /' "$WORK/explain.txt"
grep -q 'TRANSPORT_IDENTITY' "$WORK/explain.txt" || fail "explain does not name TRANSPORT_IDENTITY"
grep -q 'monky-deployd enroll --force --jwt' "$WORK/explain.txt" || fail "explain gives no fix line"

echo "== transport sdk, a group-writable identity"
identity_json "$WORK/key.pem"
chmod 0660 "$WORK/identity.json"
tick "$WORK/sdk.yaml" 1
grep -q 'TRANSPORT_IDENTITY.*group-writable' "$WORK/tick.log" || { fail "a group-writable identity is not refused"; sed 's/^/  | /' "$WORK/tick.log"; }

echo "== check config accepts transport sdk in this build"
agent "$WORK/sdk.yaml" check config || fail "check config refused transport sdk"

if ((${#FAILED[@]} > 0)); then
	printf 'sdk.sh FAILED:\n' >&2
	printf '  %s\n' "${FAILED[@]}" >&2
	exit 1
fi
echo "sdk.sh: ok"
