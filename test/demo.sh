#!/usr/bin/env bash
# make demo: the main job of monky-deployd against the simulator (tenancy + OpenBao on loopback).
#
# Five ticks of `monky-deployd run --once`, each followed by `explain`:
#   1. desire v1            → apply: bundle verified, lease, login, secrets, compose up, healthy (exit 0)
#   2. nothing changed      → heartbeat (exit 0)
#   3. desire v2            → the new release is applied (exit 0)
#   4. desire v1 again      → ROLLBACK_REFUSED (exit 1, expected)
#   5. retire the env       → compose down (exit 0)
#
# It needs bin/monky-deployd and bin/monky-sim (`make build`; built here when missing) and Go to
# build the recording docker stub. Everything lives in a temporary directory that is removed at
# the end, and the simulator is stopped: nothing keeps running.
#
# Environment:
#   MONKY_DEMO_REAL_DOCKER=1  use the real Docker engine when `docker compose` and `docker info`
#                             answer (the demo images monky-demo/*:1 are not in any registry, so
#                             the pull fails unless you built them yourself)
#   MONKY_DEMO_BIN=DIR        take monky-deployd and monky-sim from DIR instead of bin/
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$(pwd)
ENV_ID=env-demo-01
START_NS=$(date +%s%N)

BIN=${MONKY_DEMO_BIN:-$ROOT/bin}
if [[ -z "${MONKY_DEMO_BIN:-}" && ( ! -x "$BIN/monky-deployd" || ! -x "$BIN/monky-sim" ) ]]; then
	echo "bin/monky-deployd or bin/monky-sim is missing: running make build"
	make -s build
fi
for b in monky-deployd monky-sim; do
	if [[ ! -x "$BIN/$b" ]]; then
		echo "demo: $BIN/$b is missing (run make build)" >&2
		exit 1
	fi
done

WORK=$(mktemp -d "${TMPDIR:-/tmp}/monky-demo.XXXXXX")
# shellcheck source=test/sim.sh
source test/sim.sh

banner() {
	echo
	echo "==== $* ===="
}

# --- docker: the real engine only when asked for and able; else the recording stub ---------
real_docker_ok() {
	command -v docker >/dev/null 2>&1 &&
		timeout 10 docker compose version >/dev/null 2>&1 &&
		timeout 10 docker info >/dev/null 2>&1
}
if [[ "${MONKY_DEMO_REAL_DOCKER:-}" == "1" ]] && real_docker_ok; then
	DOCKER_BIN=$(command -v docker)
	echo "using the real Docker engine with compose v2 ($DOCKER_BIN; MONKY_DEMO_REAL_DOCKER=1)"
else
	if [[ "${MONKY_DEMO_REAL_DOCKER:-}" == "1" ]]; then
		echo "no Docker engine with compose v2 answers here: using the recording docker stub"
	elif real_docker_ok; then
		echo "a Docker engine with compose v2 answers, but the demo images (monky-demo/api:1) cannot be pulled:"
		echo "using the recording docker stub (MONKY_DEMO_REAL_DOCKER=1 uses the engine)"
	else
		echo "no Docker engine with compose v2 answers here: using the recording docker stub"
	fi
	mkdir -p "$WORK/bin" "$WORK/docker-state"
	go build -o "$WORK/bin/fakedocker" ./test/fakedocker
	export FAKE_DOCKER_LOG=$WORK/docker-calls.jsonl
	export FAKE_DOCKER_STATE=$WORK/docker-state
	# the agent hands docker no variable of its own environment: the stub's knobs travel in a wrapper
	printf '#!/bin/sh\nFAKE_DOCKER_LOG=%q FAKE_DOCKER_STATE=%q exec %q "$@"\n' \
		"$FAKE_DOCKER_LOG" "$FAKE_DOCKER_STATE" "$WORK/bin/fakedocker" >"$WORK/bin/docker"
	chmod 0755 "$WORK/bin/docker"
	DOCKER_BIN=$WORK/bin/docker
fi

# --- the simulator --------------------------------------------------------------------------
"$BIN/monky-sim" serve --releases testdata/demo --env "$ENV_ID" --kit "$WORK/kit" \
	--addr-file "$WORK/addr.json" --state-dir "$WORK/state" --docker-bin "$DOCKER_BIN" \
	--quiet >"$WORK/sim.log" 2>&1 &
SIM_PID=$!
wait_sim "$WORK/addr.json" "$WORK/sim.log" || exit 1
echo "simulator up: $(tr -d '\n' <"$WORK/addr.json")"
echo "install kit:  $WORK/kit/config.yaml (transport system, state in $WORK/state)"

sim() { "$BIN/monky-sim" "$1" --addr-file "$WORK/addr.json" --env "$ENV_ID" "${@:2}"; }
agent() { "$BIN/monky-deployd" --config "$WORK/kit/config.yaml" "$@"; }

FAILED=()
# tick WANT: one `run --once`; prints its exit code and the agent's closing line (`exit N: …`), if any.
tick() {
	local want=$1 rc=0
	agent run --once 2>"$WORK/tick.log" || rc=$?
	{ grep '^monky-deployd:' "$WORK/tick.log" || true; sed -n 's/.*"message":"\(exit [0-9]*: [^"]*\)".*/\1/p' "$WORK/tick.log"; } | sed 's/^/  /'
	if [[ "$rc" -eq "$want" ]]; then
		echo "run --once exit code: $rc (expected)"
	else
		echo "run --once exit code: $rc (expected $want) — agent log:"
		sed 's/^/  | /' "$WORK/tick.log"
		FAILED+=("$STEP: exit $rc, expected $want")
	fi
}

STEP="1 apply v1"
banner "1. tenancy desires release v1: the first tick applies it"
sim desire --release v1
tick 0
agent explain -n 3

STEP="2 heartbeat"
banner "2. nothing changed: the next tick is a heartbeat"
tick 0
agent explain -n 1

STEP="3 apply v2"
banner "3. tenancy desires release v2: the tick applies the new release"
sim desire --release v2
tick 0
agent explain -n 1

STEP="4 rollback refused"
banner "4. tenancy desires v1 again: a rollback the bundle does not allow is refused (exit 1 expected)"
sim desire --release v1
tick 1
agent explain -n 1

STEP="5 retire"
banner "5. the env is retired (volumes purged): the tick takes the services down"
sim retire --purge
tick 0
agent explain -n 1
echo
agent status

if [[ -n "${FAKE_DOCKER_LOG:-}" && -f "$FAKE_DOCKER_LOG" ]]; then
	echo
	echo "docker calls the stub recorded: $(wc -l <"$FAKE_DOCKER_LOG")"
fi
echo "what tenancy saw: $(sim counts)"

END_NS=$(date +%s%N)
MS=$(((END_NS - START_NS) / 1000000))
echo
printf 'wall time: %d.%03d s\n' $((MS / 1000)) $((MS % 1000))
if ((${#FAILED[@]} > 0)); then
	echo "demo FAILED: unexpected exit codes:" >&2
	printf '  %s\n' "${FAILED[@]}" >&2
	exit 1
fi
echo "demo finished"
