#!/usr/bin/env bash
# make mesh-e2e: the sdk build of the agent through a REAL OpenZiti network on loopback.
#
#   1. the ziti binary (controller + router) built from the vendored tarball, once, into a cache
#      keyed by the tarball's sha256 (never downloaded); $ZITI instead when set
#   2. `ziti edge quickstart` with every listener on 127.0.0.1 (the router's too) on free ports
#   3. the simulator (tenancy + OpenBao) on loopback; the services monky.tenancy.deploy and openbao,
#      hosted by the quickstart router (host.v1) towards the simulator's two listeners; Bind
#      policies for the router, Dial policies for the box's identity monky-host.<env>, which the
#      agent enrols itself (`monky-deployd enroll --jwt`: written 0600, the JWT deleted; a second
#      enroll without --force keeps it)
#   4. the agent with `transport: sdk`, its intercept names resolvable nowhere but in the mesh:
#      desire v1 → `run --once` applies (exit 0); a heartbeat (exit 0); desire v2 → applies (exit
#      0); the simulator holds the reports
#   5. mesh faults: the box's Dial policy deleted (MESH_NO_SERVICE, exit 1, a person, naming the
#      service and the identity; the policy back, the next tick heartbeats); the controller and
#      router stopped (SIGSTOP: a temporary fault, exit 75, within the tick's deadline; resumed,
#      a tick heartbeats by itself once the router is back, the ones before it exit 75)
#   7. the sdk build with the race detector ($SDK_RACE_BIN) in the `run` loop, tenancy's interval
#      at 1 s: no data race; after many ticks as many goroutines and open files as after a few
#
# Usage: test/mesh/run.sh      (make mesh-e2e builds the agent first)
# Env:   SDK_BIN       the sdk build of the agent (default bin/monky-deployd-sdk)
#        SDK_RACE_BIN  the same build with the race detector (make sdk-race)
#        SIM_BIN       the simulator (default bin/monky-sim, built into the temp dir when missing)
#        ZITI          a ziti binary to use instead of the cached build
#        ZITI_TARBALL  the vendored ziti source (default: third_party/openziti/ziti/ in ../shared)
#        MESH_CACHE    where the ziti build is cached (default: $(go env GOCACHE)/../monky-ziti)
#        KEEP_WORK=1   keep the temp dir (its logs) at the end
#        MESH_BENCH=N  after the first heartbeat, N rounds of a heartbeat over sdk and one over
#                      proxy (`ziti tunnel proxy`), their table, and no faults (make bench-mesh)
# Everything it starts is stopped, and the temp dir removed, however it ends.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/../.."
ROOT=$(pwd)
T0=$(date +%s)
ENV_ID=env-demo-01
BOX=monky-host.$ENV_ID
SVC_TENANCY=monky.tenancy.deploy
SVC_BAO=openbao
# the agent's intercept addresses: names no resolver knows, so a tick that works went through the mesh
TENANCY_URL=http://$SVC_TENANCY:443
BAO_URL=http://bao.mesh.invalid:8200

log() { printf '[mesh %4ds] %s\n' "$(($(date +%s) - T0))" "$*"; }
die() {
	echo "mesh-e2e: $*" >&2
	exit 1
}

AGENT_BIN=$(realpath -m "${SDK_BIN:-bin/monky-deployd-sdk}")
[[ -x "$AGENT_BIN" ]] || die "$AGENT_BIN is missing (run make sdk, or make mesh-e2e)"
"$AGENT_BIN" version | grep -q '^transports: sdk' || die "$AGENT_BIN is not the sdk build (its version lists no sdk transport)"

# --- 1. the ziti binary ------------------------------------------------------------------------
if [[ -z "${ZITI:-}" ]]; then
	ZITI=$(bash test/mesh/ziti.sh) || die "no ziti binary (test/mesh/ziti.sh, above)"
fi
[[ -x "$ZITI" ]] || die "ZITI=$ZITI is not an executable"
log "ziti: $ZITI ($("$ZITI" version 2>/dev/null | head -1))"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/monky-mesh.XXXXXX")
# shellcheck source=test/sim.sh
source test/sim.sh
CTRL_PID="" ROUTER_PID=""
# stop_pid PID: stops the process (resumed first if stopped), TERM then KILL after 10 s
stop_pid() {
	local p=$1
	[[ -n "$p" ]] && kill -0 "$p" 2>/dev/null || return 0
	kill -CONT "$p" 2>/dev/null || true
	kill -TERM "$p" 2>/dev/null || true
	for _ in $(seq 1 40); do kill -0 "$p" 2>/dev/null || break; sleep 0.25; done
	kill -KILL "$p" 2>/dev/null || true
	wait "$p" 2>/dev/null || true
}
cleanup() {
	local rc=$?
	stop_pid "${PROXY_PID:-}"
	stop_pid "$ROUTER_PID"
	stop_pid "$CTRL_PID"
	stop_sim
	if [[ -n "${KEEP_WORK:-}" ]]; then echo "mesh-e2e: kept $WORK"; else rm -rf "$WORK"; fi
	exit "$rc"
}
trap cleanup EXIT

# --- 2. the simulator and the docker stub ------------------------------------------------------
SIM_BIN=${SIM_BIN:-$ROOT/bin/monky-sim}
if [[ ! -x "$SIM_BIN" ]]; then
	SIM_BIN=$WORK/monky-sim
	CGO_ENABLED=0 go build -o "$SIM_BIN" ./cmd/monky-sim
fi
mkdir -p "$WORK/bin" "$WORK/docker-state" "$WORK/home"
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
KIT=$WORK/kit/config.yaml
sim_tenancy=$(sed -n 's|^  base_url: "http://\(.*\)"$|\1|p' "$KIT")
sim_bao=$(sed -n 's|^  addr: "http://\(.*\)"$|\1|p' "$KIT")
[[ "$sim_tenancy" == 127.0.0.1:* && "$sim_bao" == 127.0.0.1:* ]] ||
	die "the simulator's listeners are not on 127.0.0.1: tenancy '$sim_tenancy', OpenBao '$sim_bao'"
log "simulator: tenancy $sim_tenancy, OpenBao $sim_bao"

# --- 3. the controller and router, on loopback only --------------------------------------------
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
CTRL_PORT=$(free_port)
ROUTER_PORT=$(free_port)
while [[ "$ROUTER_PORT" == "$CTRL_PORT" ]]; do ROUTER_PORT=$(free_port); done
# the CLI and quickstart's own login keep their session in $HOME/.config/ziti
ZT_ENV=(HOME="$WORK/home" ZITI_CTRL_BIND_ADDRESS=127.0.0.1 ZITI_CTRL_EDGE_BIND_ADDRESS=127.0.0.1)
zt() { env "${ZT_ENV[@]}" "$ZITI" "$@"; }
QS_ARGS=(--home "$WORK/qs" --ctrl-address 127.0.0.1 --ctrl-port "$CTRL_PORT"
	--router-address 127.0.0.1 --router-port "$ROUTER_PORT")
# the router's generated config binds tls:0.0.0.0:PORT: configure, pin it to 127.0.0.1, then start
zt edge quickstart "${QS_ARGS[@]}" --configure-and-exit >"$WORK/qs-configure.log" 2>&1 ||
	{
		tail -20 "$WORK/qs-configure.log" >&2
		die "quickstart --configure-and-exit failed"
	}
sed -i 's#tls:0.0.0.0:#tls:127.0.0.1:#g' "$WORK/qs/quickstart/router-quickstart.yaml"
! grep -n '0\.0\.0\.0' "$WORK/qs/quickstart/router-quickstart.yaml" || die "the router's config still binds 0.0.0.0"
log "quickstart configured (controller 127.0.0.1:$CTRL_PORT, router 127.0.0.1:$ROUTER_PORT)"
QS=$WORK/qs/quickstart
# the controller and the router as two processes of their own (quickstart configured them), so a
# fault can stop one and keep the other. Started by exec (env execs ziti): $! is the pid to stop.
# wait_up PID NAME OWN WATCH PATTERN COUNT: WATCH holds PATTERN more than COUNT times within
# 120 s, PID running; else the tail of PID's own log OWN, and the run ends
wait_up() {
	local pid=$1 name=$2 own=$3 watch=$4 pattern=$5 before=$6
	for _ in $(seq 1 240); do
		(($(grep -c -- "$pattern" "$watch" || true) > before)) && return 0
		kill -0 "$pid" 2>/dev/null || {
			tail -20 "$own" >&2
			die "the $name stopped at start"
		}
		sleep 0.5
	done
	tail -20 "$own" >&2
	die "the $name not ready within 120 s"
}
# the controller is up once its raft elects it (a one-node cluster: it leads); the router, once
# the controller has synchronized it (its log: the edge router's sync done)
CTRL_READY='entering leader state'
ROUTER_READY='final status: SYNC_DONE'
# start_ziti NAME CONFIG OWN READY: `ziti NAME run CONFIG`, its output appended to OWN, until the
# controller's log says READY once more; its pid in ZITI_PID
start_ziti() {
	local name=$1 conf=$2 own=$3 ready=$4 n
	n=$(grep -c -- "$ready" "$WORK/ctrl.log" || true)
	env "${ZT_ENV[@]}" "$ZITI" "$name" run "$conf" >>"$own" 2>&1 &
	ZITI_PID=$!
	wait_up "$ZITI_PID" "$name" "$own" "$WORK/ctrl.log" "$ready" "${n:-0}"
}
start_controller() {
	start_ziti controller "$QS/ctrl.yaml" "$WORK/ctrl.log" "$CTRL_READY"
	CTRL_PID=$ZITI_PID
}
start_router() {
	start_ziti router "$QS/router-quickstart.yaml" "$WORK/router.log" "$ROUTER_READY"
	ROUTER_PID=$ZITI_PID
}
: >"$WORK/ctrl.log"
: >"$WORK/router.log"
start_controller
start_router
listeners=$(ss -Hltnp | grep -E "pid=($CTRL_PID|$ROUTER_PID)," | awk '{print $4}' | sort -u || true)
log "controller (pid $CTRL_PID) and router (pid $ROUTER_PID) ready; they listen on: $(echo "$listeners" | tr '\n' ' ')"
[[ -n "$listeners" ]] || die "ss shows no listener of the controller or the router"
if grep -v '^127\.0\.0\.1:' <<<"$listeners"; then die "the controller or router listens beyond 127.0.0.1 (above)"; fi

# --- 4. services, policies, the box's identity -------------------------------------------------
zt edge login "127.0.0.1:$CTRL_PORT" -u admin -p admin -y >/dev/null
host_v1() { printf '{"protocol":"tcp","address":"%s","port":%s}' "${1%:*}" "${1##*:}"; }
{
	zt edge create config tenancy-host host.v1 "$(host_v1 "$sim_tenancy")"
	zt edge create config openbao-host host.v1 "$(host_v1 "$sim_bao")"
	zt edge create service "$SVC_TENANCY" --configs tenancy-host
	zt edge create service "$SVC_BAO" --configs openbao-host
	# quickstart's router is router-quickstart, tunneler-enabled; its edge-router and
	# service-edge-router policies are #all
	zt edge create service-policy tenancy-bind Bind --service-roles "@$SVC_TENANCY" --identity-roles @router-quickstart
	zt edge create service-policy openbao-bind Bind --service-roles "@$SVC_BAO" --identity-roles @router-quickstart
	zt edge create identity "$BOX" -o "$WORK/$BOX.jwt"
	zt edge create service-policy box-dial Dial --service-roles "@$SVC_TENANCY,@$SVC_BAO" --identity-roles "@$BOX"
} >"$WORK/setup.log" 2>&1 || {
	cat "$WORK/setup.log" >&2
	die "creating the services, policies and identity failed"
}
log "services $SVC_TENANCY → $sim_tenancy and $SVC_BAO → $sim_bao (router-hosted), policies, identity $BOX"

# the agent's config: the kit's, with transport sdk, the identity, and intercept names
IDENTITY=$WORK/identities/$BOX.json
CONFIG=$WORK/config.yaml
sed -e "s|^transport: system$|transport: sdk\nidentity: \"$IDENTITY\"|" \
	-e "s|^  base_url: .*|  base_url: \"$TENANCY_URL\"\n  service: $SVC_TENANCY|" \
	-e "s|^  addr: .*|  addr: \"$BAO_URL\"\n  service: $SVC_BAO|" "$KIT" >"$CONFIG"
# a temporary fault needs a person past 45 s: the router-down case's two ticks wait out their
# 30 s deadlines, the first within it, the second past it
echo "stuck_after_s: 45" >>"$CONFIG"
chmod 0640 "$CONFIG"
agent() { "$AGENT_BIN" --config "$CONFIG" "$@"; }

FAILED=()
PASSED=()
fail() {
	echo "FAIL: $*"
	FAILED+=("$*")
}
pass() {
	echo "ok: $*"
	PASSED+=("$*")
}

# the agent enrols its identity itself, with the SDK's enrolment, where the config says
if agent enroll --jwt "$WORK/$BOX.jwt" >"$WORK/enroll.log" 2>&1; then
	pass "enroll --jwt: exit 0"
else
	sed 's/^/  | /' "$WORK/enroll.log"
	fail "enroll --jwt failed"
fi
sed 's/^/  /' "$WORK/enroll.log"
[[ -s "$IDENTITY" ]] || die "no identity at $IDENTITY"
mode=$(stat -c %a "$IDENTITY")
if [[ "$mode" == 600 ]]; then pass "the identity is written 0600"; else fail "the identity is mode $mode, not 0600"; fi
if [[ ! -e "$WORK/$BOX.jwt" ]]; then pass "the JWT is deleted"; else fail "the JWT is still there"; fi
# a second enrolment does not replace an identity that loads
zt edge create identity monky-host.spare -o "$WORK/spare.jwt" >>"$WORK/setup.log" 2>&1
before=$(sha256sum <"$IDENTITY")
if agent enroll --jwt "$WORK/spare.jwt" >"$WORK/enroll-again.log" 2>&1; then
	fail "enroll over a working identity without --force exited 0"
elif grep -q 'already holds an identity that loads' "$WORK/enroll-again.log" && [[ -e "$WORK/spare.jwt" && "$(sha256sum <"$IDENTITY")" == "$before" ]]; then
	pass "enroll without --force keeps a working identity and the JWT"
else
	sed 's/^/  | /' "$WORK/enroll-again.log"
	fail "enroll without --force over a working identity"
fi
log "identity enrolled: $IDENTITY"

for h in "${TENANCY_URL#http://}" "${BAO_URL#http://}"; do
	if getent hosts "${h%:*}" >/dev/null; then die "${h%:*} resolves here: the test would not prove the mesh"; fi
done

# tick STEP WANT: one `run --once`; its stderr in $WORK/tick-N.log
N=0
tick() {
	local step=$1 want=$2 rc=0
	N=$((N + 1))
	agent run --once 2>"$WORK/tick-$N.log" || rc=$?
	sed -n 's/.*"message":"\(exit [0-9]*: [^"]*\)".*/  \1/p' "$WORK/tick-$N.log"
	if grep -qE '^panic:|^goroutine [0-9]+ \[' "$WORK/tick-$N.log"; then
		fail "$step: the tick panicked"
		sed 's/^/  | /' "$WORK/tick-$N.log"
	elif [[ "$rc" -ne "$want" ]]; then
		fail "$step: run --once exit $rc, want $want"
		sed 's/^/  | /' "$WORK/tick-$N.log"
	else
		pass "$step: run --once exit $rc"
	fi
}
reports() { sim reports | grep -c . || true; }

# --- 5. the agent ticks through the mesh -------------------------------------------------------
log "desire v1"
sim desire --release v1
tick "apply v1" 0
r1=$(reports)
log "heartbeat"
tick "heartbeat" 0
r2=$(reports)
log "desire v2"
sim desire --release v2
tick "apply v2" 0
r3=$(reports)
agent explain -n 3 | sed 's/^/  /' || true

# check MESSAGE COMMAND...: pass MESSAGE when COMMAND succeeds, else fail it
check() {
	if "${@:2}"; then pass "$1"; else fail "$1"; fi
}
check "tenancy received a report of the apply of v1 ($r1 reports)" test "$r1" -ge 1
check "tenancy received the heartbeat's report ($r1 → $r2 reports)" test "$r2" -gt "$r1"
check "tenancy received the report of the apply of v2 ($r2 → $r3 reports)" test "$r3" -gt "$r2"
last=$(sim reports | tail -1)
echo "  last report: $last"
v2_sha=$(sim releases | grep -oE '"name":"v2","sha":"[0-9a-f]{64}"' | grep -oE '[0-9a-f]{64}') || fail "the simulator lists no release v2"
check "the last report says v2 (${v2_sha:0:12}) applied" grep -q "\"sha\":\"$v2_sha\",\"result\":\"applied\"" <<<"$last"
counts=$(sim counts)
echo "  what tenancy saw: $counts"
check "tenancy counted check-ins" grep -q checkin <<<"$counts"
status_ok() { agent status >"$WORK/status.txt" 2>&1 || { sed 's/^/  | /' "$WORK/status.txt"; return 1; }; }
check "status exits 0 after the ticks" status_ok
# --- bench (make bench-mesh: MESH_BENCH=<rounds>): the heartbeat over the mesh, sdk against proxy -
# The same agent binary, the same box (state dir, identity) and the same simulator, two configs:
# `transport: sdk` (the SDK in the agent's process: each `run --once` loads the identity, logs in
# to the controller and dials through the router) and `transport: proxy` (the agent dials the
# local ports of `ziti tunnel proxy -i <the identity>`, what monky-deployd-proxy.service runs,
# which keeps its own session and circuits). Rounds alternate the two, a tick each; the table has
# each one's median wall, median CPU and peak RSS of the agent, and the proxy's own CPU per tick.
# start_proxy: `ziti tunnel proxy -i <the box's identity>` on two free local ports, as
# monky-deployd-proxy.service runs it; PROXY_PID, and PROXY_CONFIG the box's config with
# `transport: proxy` towards those ports (the same state dir, identity and intercept names)
PROXY_PID=""
start_proxy() {
	local p_t p_b
	p_t=$(free_port)
	p_b=$(free_port)
	while [[ "$p_b" == "$p_t" ]]; do p_b=$(free_port); done
	env "${ZT_ENV[@]}" "$ZITI" tunnel proxy -i "$IDENTITY" "$SVC_TENANCY:$p_t" "$SVC_BAO:$p_b" >"$WORK/proxy.log" 2>&1 &
	PROXY_PID=$!
	for _ in $(seq 1 120); do
		ss -Hltn "sport = :$p_t" | grep -q . && ss -Hltn "sport = :$p_b" | grep -q . && break
		kill -0 "$PROXY_PID" 2>/dev/null || { tail -20 "$WORK/proxy.log" >&2; die "ziti tunnel proxy stopped at start"; }
		sleep 0.5
	done
	ss -Hltn "sport = :$p_t" | grep -q . || die "ziti tunnel proxy does not listen on $p_t"
	PROXY_CONFIG=$WORK/config-proxy.yaml
	sed -e "s|^transport: sdk$|transport: proxy|" \
		-e "s|^  service: $SVC_TENANCY$|  service: $SVC_TENANCY\n  proxy_addr: \"127.0.0.1:$p_t\"|" \
		-e "s|^  service: $SVC_BAO$|  service: $SVC_BAO\n  proxy_addr: \"127.0.0.1:$p_b\"|" "$CONFIG" >"$PROXY_CONFIG"
	chmod 0640 "$PROXY_CONFIG"
	"$AGENT_BIN" check config "$PROXY_CONFIG" >"$WORK/check-proxy.log" 2>&1 || { cat "$WORK/check-proxy.log" >&2; die "the proxy config does not check"; }
	log "ziti tunnel proxy (pid $PROXY_PID) on 127.0.0.1:$p_t and :$p_b"
}
bench_mesh() {
	local rounds=$1 proxy_pid
	start_proxy
	proxy_pid=$PROXY_PID
	log "bench: $rounds rounds, a heartbeat over each transport a round (proxy pid $proxy_pid)"
	# each tick a child of python: its wall by the clock, its CPU and peak RSS by getrusage; the
	# proxy's CPU from /proc over the proxy's ticks (it is idle in between)
	python3 - "$AGENT_BIN" "$CONFIG" "$PROXY_CONFIG" "$proxy_pid" "$rounds" "$WORK" <<'PY' || die "bench: a heartbeat failed (above)"
import os, resource, statistics, subprocess, sys, time
agent, sdk_conf, proxy_conf, proxy_pid, rounds, work = sys.argv[1:7]
hz = os.sysconf("SC_CLK_TCK")
def proxy_cpu():
    f = open(f"/proc/{proxy_pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / hz
rows = {"sdk": [], "proxy": []}
proxy_total = 0.0
for i in range(int(rounds) + 1):
    for t, conf in (("sdk", sdk_conf), ("proxy", proxy_conf)):
        c0, r0, w0 = proxy_cpu(), resource.getrusage(resource.RUSAGE_CHILDREN), time.monotonic()
        with open(f"{work}/bench-{t}.log", "w") as err:
            # a fresh process each: RUSAGE_CHILDREN's peak is the largest child's, so the peak
            # RSS is read from the child's own VmHWM line (MONKY_DEPLOYD_TRACE)
            rc = subprocess.run([agent, "--config", conf, "run", "--once"], stderr=err,
                                env=dict(os.environ, MONKY_DEPLOYD_TRACE="1")).returncode
        w1, r1, c1 = time.monotonic(), resource.getrusage(resource.RUSAGE_CHILDREN), proxy_cpu()
        if rc != 0:
            sys.stdout.write(open(f"{work}/bench-{t}.log").read())
            sys.exit(f"bench: a heartbeat over {t} exited {rc}")
        if i == 0:
            continue  # round 0 warms both (the proxy's first circuits, the page cache)
        hwm = [l.split()[2] for l in open(f"{work}/bench-{t}.log") if l.startswith("memory VmHWM")]
        cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
        rows[t].append((1000 * (w1 - w0), 1000 * cpu, int(hwm[-1]) / 1024 if hwm else float("nan")))
        if t == "proxy":
            proxy_total += c1 - c0
print(f"heartbeat through the mesh, {rounds} ticks each, alternating (load average after: {open('/proc/loadavg').read().split()[0]})")
print(f"{'transport':<10} {'wall ms median / mean':>22} {'agent CPU ms median / mean':>27} {'agent peak RSS MiB (median)':>28} {'proxy CPU ms a tick':>20}")
sm = {}
for t, r in rows.items():
    w, c, m = ([x[k] for x in r] for k in range(3))
    pc = 1000 * proxy_total / len(r) if t == "proxy" else 0.0
    sm[t] = (statistics.median(w), statistics.mean(c), statistics.median(m), pc)
    print(f"{t:<10} {statistics.median(w):12.1f} / {statistics.mean(w):6.1f} {statistics.median(c):16.1f} / {statistics.mean(c):6.1f} {statistics.median(m):28.1f} {(f'{pc:.1f}' if t == 'proxy' else '-'):>20}")
s, p = sm["sdk"], sm["proxy"]
print(f"what the SDK adds to a heartbeat: {s[0] - p[0]:+.1f} ms of wall (medians), {s[1] - (p[1] + p[3]):+.1f} ms of CPU "
      f"(means; the agent against the agent and the proxy together), {s[2] - p[2]:+.1f} MiB of the agent's peak RSS")
PY
	stop_pid "$proxy_pid"
}
if [[ -n "${MESH_BENCH:-}" ]]; then
	[[ "$MESH_BENCH" =~ ^[0-9]+$ ]] || die "MESH_BENCH=$MESH_BENCH is not a number of rounds"
	bench_mesh "$MESH_BENCH"
	exit 0
fi

# --- 5b. the same box over `transport: proxy` (ziti tunnel proxy) -------------------------------
# One heartbeat over each transport, proxy first: each exits 0, journals the same transitions and
# verdict (explain's newest tick, its times and durations aside), and tenancy holds the same
# report of each.
start_proxy
# same_tick: explain's newest tick without the tick number, the times and the step durations,
# and without explain's fold of the ticks like it (the sdk's heartbeat is folded into the proxy's:
# explain finds them alike too)
same_tick() {
	agent explain -n 1 2>&1 | sed -E '/^ *\(and [0-9]+ more ticks? like it/d; s/^ *tick [0-9]+ +//; s/[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9:]{8}Z//g; s/ [0-9]+ms / /g; s/  +/ /g'
}
rp=0
"$AGENT_BIN" --config "$PROXY_CONFIG" run --once 2>"$WORK/tick-proxy.log" || rp=$?
check "a heartbeat over transport: proxy exits 0 (exit $rp)" test "$rp" -eq 0
same_tick >"$WORK/explain-proxy.txt"
report_proxy=$(sim reports | tail -1)
tick "a heartbeat over transport: sdk after it" 0
same_tick >"$WORK/explain-sdk.txt"
report_sdk=$(sim reports | tail -1)
same_journal() { diff "$WORK/explain-proxy.txt" "$WORK/explain-sdk.txt" | sed 's/^/  | /'; cmp -s "$WORK/explain-proxy.txt" "$WORK/explain-sdk.txt"; }
check "sdk and proxy journal the same transitions and verdict" same_journal
check "tenancy holds the same report of each" test "$report_proxy" == "$report_sdk"
check "the report says the box runs v2 (${v2_sha:0:12}), healthy" grep -q "\"sha\":\"$v2_sha\"" <<<"$report_sdk"
sed 's/^/  /' "$WORK/explain-sdk.txt"
stop_pid "$PROXY_PID"
PROXY_PID=""

# --- 6. mesh faults, each named -----------------------------------------------------------------
# tick_says N PATTERN: tick N's log holds PATTERN
tick_says() { grep -q -- "$2" "$WORK/tick-$1.log"; }
explain_says() { agent explain -n 1 2>&1 | grep -q -- "$1"; }

log "fault: the box's Dial policy deleted at the controller"
zt edge delete service-policy box-dial >>"$WORK/setup.log" 2>&1 || die "deleting the Dial policy failed"
tick "no Dial policy: a person's fault" 1
check "the tick names MESH_NO_SERVICE, the service and the identity" \
	tick_says "$N" "MESH_NO_SERVICE.*the controller offers no service $SVC_TENANCY to the box's identity $BOX"
check "explain names MESH_NO_SERVICE" explain_says MESH_NO_SERVICE
status_rc=0
agent status --json >"$WORK/status-nodial.json" 2>&1 || status_rc=$?
check "status: needs_person, MESH_NO_SERVICE (exit $status_rc)" grep -q '"verdict": *"needs_person"' "$WORK/status-nodial.json"
zt edge create service-policy box-dial Dial --service-roles "@$SVC_TENANCY,@$SVC_BAO" --identity-roles "@$BOX" >>"$WORK/setup.log" 2>&1 ||
	die "creating the Dial policy again failed"
tick "the Dial policy back: the next tick heartbeats by itself" 0

# until_heartbeat STEP ALLOWED: ticks until one exits 0 (at most 8, 5 s apart), the ones before
# it exiting only codes matching ALLOWED (75: temporary): the box comes back with nobody acting
until_heartbeat() {
	local step=$1 allowed=$2 rc rcs="" ok=""
	for _ in 1 2 3 4 5 6 7 8; do
		N=$((N + 1))
		rc=0
		agent run --once 2>"$WORK/tick-$N.log" || rc=$?
		rcs+="$rc "
		if [[ "$rc" == 0 ]]; then ok=1; break; fi
		[[ "$rc" =~ ^($allowed)$ ]] || break
		sleep 5
	done
	if [[ -n "$ok" ]]; then pass "$step: a tick heartbeats by itself (exits: ${rcs% })"; else
		fail "$step: no tick heartbeats (exits: ${rcs% }; allowed before it: $allowed)"
		sed 's/^/  | /' "$WORK/tick-$N.log"
	fi
}
status_says() { # status_says RC PATTERN: status exits RC and its text holds PATTERN
	local rc=0
	agent status >"$WORK/status.txt" 2>&1 || rc=$?
	if [[ "$rc" == "$1" ]] && grep -q -- "$2" "$WORK/status.txt"; then return 0; fi
	sed 's/^/  | /' "$WORK/status.txt"
	return 1
}
recreate_policies() { # the policies again, after a service or identity they named was deleted
	zt edge delete service-policy tenancy-bind || true
	zt edge delete service-policy box-dial || true
	zt edge create service-policy tenancy-bind Bind --service-roles "@$SVC_TENANCY" --identity-roles @router-quickstart
	zt edge create service-policy box-dial Dial --service-roles "@$SVC_TENANCY,@$SVC_BAO" --identity-roles "@$BOX"
}

log "fault: the service $SVC_TENANCY deleted at the controller"
zt edge delete service "$SVC_TENANCY" >>"$WORK/setup.log" 2>&1 || die "deleting the service failed"
tick "the service deleted: a person's fault" 1
check "the tick names MESH_NO_SERVICE and the service" tick_says "$N" "MESH_NO_SERVICE.*no service $SVC_TENANCY"
check "status: needs a person, MESH_NO_SERVICE" status_says 1 MESH_NO_SERVICE
{ zt edge create service "$SVC_TENANCY" --configs tenancy-host && recreate_policies; } >>"$WORK/setup.log" 2>&1 ||
	die "creating the service again failed"
# the router hosts the new service once it has seen it: until then a dial finds no terminator
until_heartbeat "the service back" '1|75'

log "fault: the box's identity deleted at the controller"
zt edge delete identity "$BOX" >>"$WORK/setup.log" 2>&1 || die "deleting the identity failed"
t0=$(date +%s)
tick "the identity deleted: a person's fault" 1
took=$(($(date +%s) - t0))
check "the identity refused: the tick ends at once, no retry until its deadline (${took} s)" test "$took" -lt 20
check "the tick names TRANSPORT_IDENTITY" tick_says "$N" TRANSPORT_IDENTITY
check "status: needs a person, TRANSPORT_IDENTITY" status_says 1 TRANSPORT_IDENTITY
check "status's fix enrols the box again with the agent (enroll --force)" grep -q 'enroll --force' "$WORK/status.txt"
{ zt edge create identity "$BOX" -o "$WORK/$BOX-again.jwt" && recreate_policies; } >>"$WORK/setup.log" 2>&1 ||
	die "creating the identity again failed"
if agent enroll --force --jwt "$WORK/$BOX-again.jwt" >"$WORK/enroll-force.log" 2>&1; then
	pass "enroll --force replaces the refused identity"
else
	sed 's/^/  | /' "$WORK/enroll-force.log"
	fail "enroll --force over the refused identity"
fi
until_heartbeat "the identity enrolled again" 75

log "fault: the router stopped (the controller up)"
stop_pid "$ROUTER_PID"
tick "the router down: temporary" 75
check "the tick names a temporary fault of the mesh (UNREACHABLE or TIMEOUT)" tick_says "$N" '"code":"\(TIMEOUT\|UNREACHABLE\)"'
check "status: working on it while the fault is young" status_says 0 'working'
no_tunneller() { ! grep -q 'ziti-edge-tunnel' "$WORK/status.txt"; }
check "status's fix names no tunneller (the sdk transport has none)" no_tunneller
# the fix as printed (sudo -u the agent's user: root here) asks the identity's controller, which is up
fix=$(sed -n 's/^ *fix: *//p' "$WORK/status.txt" | head -n 1)
if [[ "$fix" == curl* ]] && out=$(bash -c "$fix" 2>&1) && grep -q 'the controller answers' <<<"$out"; then
	pass "status's fix runs as printed: the controller answers"
else
	fail "status's fix does not run as printed, or is not the sdk one: $fix (${out:-})"
fi
tick "the router still down: temporary" 75
check "status: a person past stuck_after_s" status_says 1 'needs a person'
start_router
until_heartbeat "the router back" 75

log "fault: the controller hung (SIGSTOP; the router up), then resumed"
kill -STOP "$CTRL_PID"
t0=$(date +%s)
tick "the controller does not answer: temporary" 75
took=$(($(date +%s) - t0))
check "the hung controller's tick ended within its deadline (${took} s)" test "$took" -lt 120
check "the tick names a temporary fault of the mesh (TIMEOUT or UNREACHABLE)" tick_says "$N" '"code":"\(TIMEOUT\|UNREACHABLE\)"'
kill -CONT "$CTRL_PID"
until_heartbeat "the controller back" 75

# --- 7. the loop through the mesh: the race detector and a goroutine count ---------------------
# The sdk build with the race detector (make sdk-race) runs `run` as the unit's loop would, with
# tenancy's interval at 1 s: no data race (GORACE halt_on_error: the first one ends it, exit 66).
# One ziti context serves every tick of a process; what a tick opens through the mesh (a dial, a
# circuit, a connection) ends with it, so the loop's goroutines and open files after many ticks
# are those after a few. A loop ends with SIGQUIT, whose dump lists every goroutine.
if [[ -z "${SDK_RACE_BIN:-}" || ! -x "${SDK_RACE_BIN:-}" ]]; then
	fail "no race build at '${SDK_RACE_BIN:-}' (make mesh-e2e builds it: make sdk-race)"
else
	log "the loop: the race build, tenancy's interval 1 s"
	admin=$(sed -n 's/.*"admin":"\([^"]*\)".*/\1/p' "$WORK/addr.json")
	set_interval() { curl -fsS -X POST -H 'Content-Type: application/json' -d "{\"interval_s\":$1}" "$admin/admin/interval" >/dev/null; }
	set_interval 1 || die "the simulator's check-in interval could not be set"
	LOOP_CONFIG=$WORK/config-loop.yaml
	{
		grep -v '^interval_s:' "$CONFIG"
		echo "interval_s: 1"
	} >"$LOOP_CONFIG"
	# loop NAME SECONDS...: the race build's `run` for the sum of SECONDS, its open files counted
	# after each span (LOOP_FDS), then SIGQUIT. LOOP_RC its exit, LOOP_TICKS and LOOP_OK the
	# ticks it ended (with exit 0), LOOP_GOROUTINES the goroutines of its dump.
	loop() {
		local name=$1 pid s
		shift
		LOOP_FDS=()
		GORACE="halt_on_error=1 exitcode=66" GOTRACEBACK=all "$SDK_RACE_BIN" --config "$LOOP_CONFIG" run 2>"$WORK/loop-$name.log" &
		pid=$!
		for s in "$@"; do
			sleep "$s"
			LOOP_FDS+=("$(between_ticks "$pid")")
		done
		kill -QUIT "$pid" 2>/dev/null || true
		LOOP_RC=0
		wait "$pid" || LOOP_RC=$?
		# each tick's closing line carries its exit; the dump heads each goroutine "goroutine N gp=… ["
		LOOP_TICKS=$(grep -c '"exit":[0-9]' "$WORK/loop-$name.log" || true)
		LOOP_OK=$(grep -c '"exit":0,' "$WORK/loop-$name.log" || true)
		LOOP_GOROUTINES=$(grep -cE '^goroutine [0-9]+ .*\[' "$WORK/loop-$name.log" || true)
		echo "  loop $name: $LOOP_TICKS ticks ($LOOP_OK exit 0), exit $LOOP_RC at SIGQUIT, $LOOP_GOROUTINES goroutines, open files ${LOOP_FDS[*]}"
	}
	# between_ticks PID: PID's open files between two ticks: the fewest of ten counts 0.1 s apart
	# over a second of the loop (a count taken while a tick runs also holds its connection, the
	# state file and docker's pipes, which end with the tick)
	between_ticks() {
		local n fewest=
		for _ in $(seq 1 10); do
			n=$(find "/proc/$1/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)
			if [[ -z "$fewest" || "$n" -lt "$fewest" ]]; then fewest=$n; fi
			sleep 0.1
		done
		echo "$fewest"
	}
	no_race() { ! grep -q 'WARNING: DATA RACE' "$WORK/loop-$1.log"; }
	loop few 10
	few_ticks=$LOOP_TICKS few_goroutines=$LOOP_GOROUTINES
	check "the race build's loop: no data race (exit $LOOP_RC: 2 is SIGQUIT's, 66 a race)" test "$LOOP_RC" -eq 2
	check "the race detector reports nothing in the first loop" no_race few
	check "every tick of the first loop heartbeats ($LOOP_OK of $LOOP_TICKS, at least 2)" test "$LOOP_OK" -eq "$LOOP_TICKS" -a "$LOOP_TICKS" -ge 2
	loop many 10 25
	check "the race build's second loop: no data race (exit $LOOP_RC)" test "$LOOP_RC" -eq 2
	check "the race detector reports nothing in the second loop" no_race many
	check "every tick of the second loop heartbeats ($LOOP_OK of $LOOP_TICKS)" test "$LOOP_OK" -eq "$LOOP_TICKS"
	check "the second loop ran at least 8 ticks more than the first ($few_ticks → $LOOP_TICKS)" test "$LOOP_TICKS" -ge $((few_ticks + 8))
	check "no goroutine outlives its tick: $few_goroutines after $few_ticks ticks, $LOOP_GOROUTINES after $LOOP_TICKS (at most 4 more)" \
		test "$LOOP_GOROUTINES" -le $((few_goroutines + 4))
	check "no file or connection outlives its tick: open files ${LOOP_FDS[0]} at 10 s, ${LOOP_FDS[1]} at 35 s (at most 3 more)" \
		test "${LOOP_FDS[1]}" -le $((LOOP_FDS[0] + 3))
	set_interval 60 || true
fi

echo
echo "mesh-e2e: ${#PASSED[@]} passed, ${#FAILED[@]} failed, $(($(date +%s) - T0)) s"
if ((${#FAILED[@]} > 0)); then
	printf '  FAIL: %s\n' "${FAILED[@]}"
	echo "mesh-e2e: FAIL"
	exit 1
fi
echo "mesh-e2e: PASS"
