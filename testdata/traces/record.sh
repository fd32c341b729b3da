#!/usr/bin/env bash
# Records the journal traces under testdata/traces/ from real ticks: bin/monky-deployd against
# monky-sim (tenancy + OpenBao on loopback) and the recording docker stub. Each scenario runs
# in a fresh box and ends with `monky-deployd explain --ndjson > <scenario>.ndjson`.
#
#   make build && bash testdata/traces/record.sh     # then: go test ./explain -update
#
# The traces carry real timestamps; explain's golden tests read them with "now" = the export's
# exported_at, so the goldens are stable. Nothing keeps running afterwards.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
ROOT=$(pwd)
OUT=$ROOT/testdata/traces
BIN=${MONKY_TRACE_BIN:-$ROOT/bin}
ENV_ID=env-demo-01
WORK=$(mktemp -d "${TMPDIR:-/tmp}/monky-traces.XXXXXX")
SIM_PID=""
stop_sim() {
	if [[ -n "$SIM_PID" ]] && kill -0 "$SIM_PID" 2>/dev/null; then
		kill "$SIM_PID" && wait "$SIM_PID" 2>/dev/null || true
	fi
	SIM_PID=""
}
trap 'stop_sim; rm -rf "$WORK"' EXIT
go build -o "$WORK/docker" ./internal/fakedocker

# releases: the demo's, plus v3, a v2 whose api asks for privileged mode.
mkdir -p "$WORK/releases"
cp -r testdata/demo/* "$WORK/releases/"
cp -r testdata/demo/v2 "$WORK/releases/v3"
sed -i 's/^    image: monky-demo\/api:2$/    image: monky-demo\/api:2\n    privileged: true/' "$WORK/releases/v3/compose.yaml"

# box NAME: a fresh simulator, kit, state and docker state under $WORK/NAME.
box() {
	stop_sim
	B=$WORK/$1
	mkdir -p "$B/docker-state"
	export FAKE_DOCKER_LOG=$B/docker-calls.jsonl FAKE_DOCKER_STATE=$B/docker-state
	"$BIN/monky-sim" serve --releases "$WORK/releases" --env "$ENV_ID" --kit "$B/kit" \
		--addr-file "$B/addr.json" --state-dir "$B/state" --docker-bin "$WORK/docker" --quiet >"$B/sim.log" 2>&1 &
	SIM_PID=$!
	for _ in $(seq 1 100); do [[ -s "$B/addr.json" ]] && break; sleep 0.1; done
	echo "healthy_timeout_s: 2" >>"$B/kit/config.yaml"
}
sim() { "$BIN/monky-sim" "$1" --addr-file "$B/addr.json" --env "$ENV_ID" "${@:2}" >/dev/null; }
agent() { NO_COLOR=1 "$BIN/monky-deployd" --config "$B/kit/config.yaml" "$@"; }
tick() {
	local rc=0
	agent run --once 2>>"$B/ticks.log" || rc=$?
	if [[ "$rc" -ne "$1" ]]; then
		echo "record: $SCEN: run --once exit $rc, want $1" >&2
		cat "$B/ticks.log" >&2
		exit 1
	fi
}
export_to() { agent explain --ndjson >"$OUT/$1.ndjson"; echo "wrote testdata/traces/$1.ndjson"; }

SCEN=full-apply; box $SCEN
sim desire --release v1; tick 0; tick 0
export_to $SCEN

SCEN=rollback-refused; box $SCEN
sim desire --release v1; tick 0
sim desire --release v2; tick 0
sim desire --release v1; tick 1; tick 1
export_to $SCEN

SCEN=privileged-refused; box $SCEN
sim desire --release v1; tick 0
sim desire --release v3; tick 1
export_to $SCEN

SCEN=pull-failed; box $SCEN
echo "Error response from daemon: Head \"https://harbor.monky.internal/v2/monky-demo/api/manifests/1\": no basic auth credentials" >"$B/docker-state/pull-error"
sim desire --release v1; tick 1
export_to $SCEN

SCEN=unhealthy; box $SCEN
echo api >"$B/docker-state/unhealthy"
sim desire --release v1; tick 1
export_to $SCEN

SCEN=disk-insufficient; box $SCEN
printf 'disk:\n  headroom_bytes: 1099511627776000\n' >>"$B/kit/config.yaml"
sim desire --release v1; tick 1; tick 1
export_to $SCEN

SCEN=unauthenticated-blocked; box $SCEN
sim desire --release v1; tick 0
sim reveal --kit "$B/other-kit"; tick 1; tick 1
export_to $SCEN

SCEN=connection-refused; box $SCEN
sim desire --release v1; tick 0
stop_sim; tick 75
export_to $SCEN
