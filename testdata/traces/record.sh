#!/usr/bin/env bash
# Records the journal traces under testdata/traces/ from real ticks: bin/monky-deployd against
# monky-sim (tenancy + OpenBao on loopback) and the recording docker stub. Each scenario runs
# in a fresh box and ends with `monky-deployd explain --ndjson > <scenario>.ndjson`.
#
#   make build && bash testdata/traces/record.sh [SCENARIO...]   # then: go test ./explain -update
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
# shellcheck source=test/sim.sh
source test/sim.sh
go build -o "$WORK/docker" ./test/fakedocker
go build -o "$WORK/gen" ./testdata/traces/gen

# releases: the demo's, plus v3, a v2 whose api asks for privileged mode.
mkdir -p "$WORK/releases"
cp -r testdata/demo/* "$WORK/releases/"
cp -r testdata/demo/v2 "$WORK/releases/v3"
sed -i 's/^    image: monky-demo\/api:2$/    image: monky-demo\/api:2\n    privileged: true/' "$WORK/releases/v3/compose.yaml"
# broken: v1 whose compose.yaml does not parse (BUNDLE_INVALID).
cp -r testdata/demo/v1 "$WORK/releases/broken"
printf 'services:\n  api: [monky-demo/api:1\n' >"$WORK/releases/broken/compose.yaml"
# incomplete: v1 whose .env.template needs a variable no manifest entry supplies.
cp -r testdata/demo/v1 "$WORK/releases/incomplete"
echo 'SENTRY_DSN=${SENTRY_DSN}' >>"$WORK/releases/incomplete/.env.template"
# foreign: v1 whose manifest reads another env's secret.
cp -r testdata/demo/v1 "$WORK/releases/foreign"
sed -i 's#monky/data/env-demo-01/see/db#monky/data/env-prod-07/see/db#' "$WORK/releases/foreign/secrets.manifest.json"
# b3..b6: v2 with a build comment each, four more shas to spend the lease budget on.
for n in 3 4 5 6; do
	cp -r testdata/demo/v2 "$WORK/releases/b$n"
	echo "# build $n" >>"$WORK/releases/b$n/compose.yaml"
done

# GEN[scenario]: the scenarios served by testdata/traces/gen, with its flags.
declare -A GEN=(
	[bundle-sha-mismatch]="--tampered v1"
	[bundle-env-mismatch]="--foreign-env v1=env-prod-07"
	[lease-shape]="--lease-shape approle"
)

# box NAME: a fresh simulator, kit, state and docker state under $WORK/NAME.
box() {
	stop_sim
	B=$WORK/$1
	mkdir -p "$B/docker-state"
	export FAKE_DOCKER_LOG=$B/docker-calls.jsonl FAKE_DOCKER_STATE=$B/docker-state
	if [[ -n "${GEN[$1]:-}" ]]; then
		# a knob the monky-sim CLI lacks: testdata/traces/gen serves the same simulator
		# shellcheck disable=SC2086
		"$WORK/gen" --releases "$WORK/releases" --env "$ENV_ID" --kit "$B/kit" \
			--addr-file "$B/addr.json" --docker-bin "$WORK/docker" ${GEN[$1]} >"$B/sim.log" 2>&1 &
	else
		"$BIN/monky-sim" serve --releases "$WORK/releases" --env "$ENV_ID" --kit "$B/kit" \
			--addr-file "$B/addr.json" --state-dir "$B/state" --docker-bin "$WORK/docker" --quiet >"$B/sim.log" 2>&1 &
	fi
	SIM_PID=$!
	for _ in $(seq 1 100); do [[ -s "$B/addr.json" ]] && break; sleep 0.1; done
	echo "healthy_timeout_s: 2" >>"$B/kit/config.yaml"
}
sim() { "$BIN/monky-sim" "$1" --addr-file "$B/addr.json" --env "$ENV_ID" "${@:2}" >/dev/null; }
# fault JSON: add a fault rule to the simulator's admin API (POST /admin/fail).
fault() {
	local admin
	admin=$(sed -n 's/.*"admin":"\([^"]*\)".*/\1/p' "$B/addr.json")
	curl -fsS -X POST -d "$1" "$admin/admin/fail" >/dev/null
}
# lease_every_apply: renew_below_s above the token's 24h ttl, so no lease-derived token is
# reused and every apply asks tenancy for a new lease.
lease_every_apply() { sed -i 's/^bao:$/bao:\n  renew_below_s: 172800/' "$B/kit/config.yaml"; }
# token_unusable: OpenBao refuses lookup-self, as for a token that has expired while the box
# was off; the agent then cannot apply without a new lease.
token_unusable() { fault '{"path":"/v1/auth/token/lookup-self","status":403,"message":"permission denied"}'; }
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
# export_to NAME: the box's journal as NDJSON (each scenario's last step), with the recording's temporary directory written
# as /tmp/monky-traces so that paths in the evidence (disk, deploy_dir) are the same at every
# recording.
export_to() {
	agent explain --ndjson | sed "s#$WORK#/tmp/monky-traces#g" >"$OUT/$1.ndjson"
	echo "wrote testdata/traces/$1.ndjson"
}

scen_full_apply() {
	sim desire --release v1; tick 0; tick 0
}

scen_rollback_refused() {
	sim desire --release v1; tick 0
	sim desire --release v2; tick 0
	sim desire --release v1; tick 1; tick 1
}

scen_privileged_refused() {
	sim desire --release v1; tick 0
	sim desire --release v3; tick 1
}

scen_pull_failed() {
	echo "Error response from daemon: Head \"https://harbor.monky.internal/v2/monky-demo/api/manifests/1\": no basic auth credentials" >"$B/docker-state/pull-error"
	sim desire --release v1; tick 1
}

scen_unhealthy() {
	echo api >"$B/docker-state/unhealthy"
	sim desire --release v1; tick 1
}

scen_disk_insufficient() {
	printf 'disk:\n  headroom_bytes: 1099511627776000\n' >>"$B/kit/config.yaml"
	sim desire --release v1; tick 1; tick 1
}

scen_unauthenticated_blocked() {
	sim desire --release v1; tick 0
	sim reveal --kit "$B/other-kit"; tick 1; tick 1
}

scen_connection_refused() {
	sim desire --release v1; tick 0
	stop_sim; tick 75
}

scen_bundle_invalid() {
	sim desire --release broken; tick 1
}

scen_env_incomplete() {
	sim desire --release incomplete; tick 1
}

scen_manifest_path_refused() {
	sim desire --release foreign; tick 1
}

scen_agent_env_mismatch() {
	sim desire --release v1; tick 0
	sed -i "s/^env_id: .*/env_id: env-demo-02/" "$B/kit/config.yaml"
	tick 78; tick 78
}

# lease-rate-limited: after a first apply, the token stops working and tenancy answers the
# lease 429 with Retry-After 900.
scen_lease_rate_limited() {
	sim desire --release v1; tick 0
	token_unusable
	fault '{"path":"/v1/agent/lease","status":429,"code":"LEASE_RATE_LIMITED","message":"lease rate limit: 5 per hour","retry_after":"900"}'
	sim desire --release v2; tick 75; tick 75
}

# lease-budget: every apply asks a new lease; five applies spend the hour's budget, and when
# the token stops working the sixth sha cannot be applied: no sixth lease is asked.
scen_lease_budget() {
	lease_every_apply
	sim desire --release v1; tick 0
	for r in v2 b3 b4 b5; do sim desire --release $r; tick 0; done
	token_unusable
	sim desire --release b6; tick 75
}

scen_compose_up_failed() {
	echo 'Error response from daemon: driver failed programming external connectivity on endpoint monky-env-demo-01-api-1: Bind for 127.0.0.1:8080 failed: port is already allocated' >"$B/docker-state/up-error"
	sim desire --release v1; tick 1
}

# superseded: a flight stopped at the lease (tenancy's 429, Retry-After 1 s), then tenancy
# desires another sha before the flight goes on.
scen_superseded() {
	sim desire --release v1; tick 0
	token_unusable
	fault '{"path":"/v1/agent/lease","status":429,"code":"LEASE_RATE_LIMITED","message":"lease rate limit","retry_after":"1","times":1}'
	sim desire --release v2; tick 75
	sleep 1.1
	sim desire --release b3; tick 0
}

# retired: tenancy retires the env (purge): the next check-in answers action down.
scen_retired() {
	sim desire --release v1; tick 0
	sim retire --purge; tick 0
}

scen_bundle_sha_mismatch() {
	sim desire --release v1-tampered; tick 1
}

scen_bundle_env_mismatch() {
	sim desire --release v1-foreign; tick 1
}

# lease-shape: tenancy answers leases in the retired AppRole shape.
scen_lease_shape() {
	sim desire --release v1; tick 1
}

SCENARIOS=(full-apply rollback-refused privileged-refused pull-failed unhealthy disk-insufficient unauthenticated-blocked connection-refused bundle-invalid env-incomplete manifest-path-refused agent-env-mismatch lease-rate-limited lease-budget compose-up-failed superseded retired bundle-sha-mismatch bundle-env-mismatch lease-shape)
# record.sh [SCENARIO...]: only the named scenarios (default: all of them).
if [[ $# -gt 0 ]]; then SCENARIOS=("$@"); fi
for s in "${SCENARIOS[@]}"; do
	SCEN=$s
	box "$s"
	"scen_${s//-/_}"
	export_to "$s"
done
