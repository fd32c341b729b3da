#!/usr/bin/env bash
# make bench: the performance figures of docs/PERFORMANCE.md in one run.
#
#   (a) a heartbeat tick as the timer runs it: the agent as the package ships it (`make agent`:
#       CGO_ENABLED=0, -trimpath, -ldflags "-s -w", the Makefile's AGENT_TAGS) against the
#       monky-sim binary, with the recording docker stub as docker_bin;
#   (b) the floor: test/bench/floor, the same check-in, stub `compose ps` and report, nothing else;
#   (c) the predecessor's floor: python3 importing the modules its agent imported;
#   (e) the design floor: the floor built with -tags design (test/bench/floor/design.go), which
#       adds what the design card asks of every heartbeat: its libraries, config.yaml, the tick
#       lock, one bbolt read and one fsync'd bbolt write — the least a tick of this design costs;
# timed side by side with hyperfine (medians, ratios a/e, a/b and a/c) and with /usr/bin/time -v (peak
# RSS, CPU); (a) and (b), then (e) and (b), once more, interleaved, with MONKY_DEPLOYD_TRACE set,
# so both print the phases of their run (test/bench/phases: start and inits, config, store open,
# lock, state read, compose ps, check-in, report, commit); then the Go benchmarks (bundle
# verification MB/s, the agent-side time of a 100-file apply), `status` and `explain` on a state
# file holding a year of history and a heartbeat's state-file work on it (with the check's
# receipt, and checking the whole file), and the binary size. It ends with one table: every
# figure, its target, met or missed, the fleet's figures from the last `make bench-fleet` run
# ($SHM/monky-bench-fleet.json) among them, and the machine's load average before and after the
# run. Then the hostile-verify table (test/bench/hostile.sh): `check bundle` and a tick on each
# of issue 37's cost classes, their CPU and peak RSS against the budget.
#
# The year's state file comes from `make bench-year` (the full 525,600 ticks; ~25 min) when its
# directory holds a finished run; otherwise a compressed year is made here (2,200 applies with 3
# heartbeats between them: enough to fill the journal's 2,000-tick retention, and all of it within
# MaxAge, so it is the harder case for status and explain; ~3 min).
#
# Environment: BENCH_RUNS (hyperfine and phases runs, default 30), BENCH_TIME_RUNS (/usr/bin/time
# runs, default 10), BENCH_YEAR_DIR (default /dev/shm/monky-bench-year), BENCH_FLEET_RESULT
# (default /dev/shm/monky-bench-fleet.json). It installs hyperfine and time
# from Debian's packages when they are missing and it runs as root. Everything else lives in a
# temporary directory that is removed at the end; the simulator is stopped.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/../.."
RUNS=${BENCH_RUNS:-30}
TRUNS=${BENCH_TIME_RUNS:-10}
SHM=/dev/shm
[[ -d $SHM && -w $SHM ]] || SHM=${TMPDIR:-/tmp}
YEAR_DIR=${BENCH_YEAR_DIR:-$SHM/monky-bench-year}
FLEET_RESULT=${BENCH_FLEET_RESULT:-$SHM/monky-bench-fleet.json}
ENV_ID=env-demo-01
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
PY_IMPORTS='import json, http.client, ssl, subprocess, logging, argparse, tarfile, hashlib, fcntl'

need() {
	local cmd=$1 pkg=$2
	if ! command -v "$cmd" >/dev/null 2>&1; then
		if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
			echo "bench: installing $pkg"
			apt-get install -y "$pkg" >/dev/null || { apt-get update >/dev/null && apt-get install -y "$pkg" >/dev/null; }
		else
			echo "bench: $cmd is missing: apt-get install -y $pkg" >&2
			exit 1
		fi
	fi
}
need hyperfine hyperfine
[[ -x /usr/bin/time ]] || need /usr/bin/time time
need python3 python3

WORK=$(mktemp -d "$SHM/monky-bench.XXXXXX")
# shellcheck source=test/sim.sh
source test/sim.sh

banner() { printf '\n==== %s ====\n' "$*"; }

banner "machine"
echo "nproc: $(nproc)   cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')   $(go version)"
echo "hyperfine: $(hyperfine --version)   python3: $(python3 --version 2>&1)   work dir: $WORK"

banner "build (CGO_ENABLED=0, -trimpath, -ldflags -s -w; the agent by make agent, as the package ships it)"
BIN=$WORK/bin
mkdir -p "$BIN"
# the package's /usr/bin/monky-deployd, byte for byte: make build's recipe
make --no-print-directory agent BIN="$BIN" >/dev/null
AGENT_TAGS=$(sed -n 's/^AGENT_TAGS := //p' Makefile)
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$BIN/floor" ./test/bench/floor
CGO_ENABLED=0 go build -tags "$AGENT_TAGS,design" -trimpath -ldflags "-s -w" -o "$BIN/floor-design" ./test/bench/floor
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$BIN/monky-sim" ./cmd/monky-sim
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$BIN/docker" ./test/fakedocker
CGO_ENABLED=0 go build -trimpath -o "$BIN/year" ./test/bench/year
CGO_ENABLED=0 go build -trimpath -o "$BIN/phases" ./test/bench/phases
AGENT_SIZE=$(stat -c %s "$BIN/monky-deployd")
FLOOR_SIZE=$(stat -c %s "$BIN/floor")
DESIGN_SIZE=$(stat -c %s "$BIN/floor-design")
awk -v a="$AGENT_SIZE" -v f="$FLOOR_SIZE" -v e="$DESIGN_SIZE" 'BEGIN {printf "monky-deployd: %.1f MiB   floor: %.1f MiB   design floor: %.1f MiB\n", a/1048576, f/1048576, e/1048576}'

banner "converge one box against monky-sim (docker stub)"
# one docker stub state for all three: the agent hands docker its own environment, so its stub
# finds the state as <stub>.state (test/fakedocker); the floors are told the same directory.
# (Before, the floors read an empty state of their own and the agent's stub the
# shared <tmp>/fakedocker-<uid> on the root filesystem: the floors' ps listed no container.)
export FAKE_DOCKER_STATE=$BIN/docker.state
mkdir -p "$FAKE_DOCKER_STATE"
KIT=$WORK/kit
STATE=$WORK/state
"$BIN/monky-sim" serve --releases testdata/demo --env "$ENV_ID" --kit "$KIT" --addr-file "$WORK/addr.json" \
	--state-dir "$STATE" --docker-bin "$BIN/docker" --desire v1 --quiet >"$WORK/sim.log" 2>&1 &
SIM_PID=$!
for _ in $(seq 1 200); do [[ -s $WORK/addr.json ]] && break; sleep 0.05; done
[[ -s $WORK/addr.json ]] || { echo "bench: monky-sim did not start" >&2; cat "$WORK/sim.log" >&2; exit 1; }
TENANCY=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["tenancy"])' "$WORK/addr.json")
AGENT=("$BIN/monky-deployd" --config "$KIT/config.yaml" run --once)
AGENT_CMD="${AGENT[*]}"
"${AGENT[@]}" 2>"$WORK/apply.log" || { echo "bench: the apply failed:" >&2; cat "$WORK/apply.log" >&2; exit 1; }
"${AGENT[@]}" 2>"$WORK/hb.log" || { echo "bench: the heartbeat failed:" >&2; cat "$WORK/hb.log" >&2; exit 1; }
FLOOR=("$BIN/floor" -tenancy "$TENANCY" -token "$STATE/bao.token" -env "$ENV_ID" -project "monky-$ENV_ID" -dir "$STATE/$ENV_ID/current" -docker "$BIN/docker")
FLOOR_CMD="${FLOOR[*]}"
"${FLOOR[@]}" || { echo "bench: the floor program failed" >&2; exit 1; }
mkdir -p "$WORK/design-state"
DESIGN=("$BIN/floor-design" "${FLOOR[@]:1}" -config "$KIT/config.yaml" -state "$WORK/design-state")
DESIGN_CMD="${DESIGN[*]}"
"${DESIGN[@]}" || { echo "bench: the design floor failed" >&2; exit 1; }
echo "applied v1; a heartbeat tick, the floor and the design floor all exit 0"

banner "(a) agent tick vs (b) floor vs (c) python3 imports — hyperfine, $RUNS runs each"
hyperfine -N --warmup 3 --runs "$RUNS" --style basic --export-json "$WORK/hf.json" \
	-n "a: monky-deployd run --once (the timer's heartbeat)" "$AGENT_CMD" \
	-n "b: floor (check-in + ps + report)" "$FLOOR_CMD" \
	-n "c: python3 -c 'import ...'" "python3 -c '$PY_IMPORTS'" \
	-n "e: design floor (the floor + the design's libraries, lock, two bbolt transactions)" "$DESIGN_CMD"

banner "peak RSS and CPU — /usr/bin/time -v, $TRUNS runs each"
timeit() { # name, command...
	local name=$1
	shift
	: >"$WORK/time-$name"
	for _ in $(seq 1 "$TRUNS"); do
		/usr/bin/time -v "$@" >/dev/null 2>"$WORK/one" || { cat "$WORK/one" >&2; exit 1; }
		awk -F': ' '/Maximum resident/ {r=$2} /User time/ {u=$2} /System time/ {s=$2} /Elapsed/ {e=$2} END {print r, u+s}' "$WORK/one" >>"$WORK/time-$name"
	done
}
timeit a "${AGENT[@]}"
timeit b "${FLOOR[@]}"
timeit c python3 -c "$PY_IMPORTS"
timeit e "${DESIGN[@]}"

python3 - "$WORK" <<'PY'
import json, statistics, sys
w = sys.argv[1]
hf = json.load(open(w + "/hf.json"))["results"]
med = {r["command"][0]: r["median"] for r in hf}
cpu = {r["command"][0]: r["user"] + r["system"] for r in hf}
rss, tcpu = {}, {}
for k in "abce":
    rows = [l.split() for l in open(f"{w}/time-{k}") if l.strip()]
    rss[k] = statistics.median(float(r[0]) for r in rows) / 1024
    tcpu[k] = statistics.median(float(r[1]) for r in rows)
print(f"{'':34} {'median wall':>12} {'CPU (mean)':>11} {'peak RSS':>10}")
names = {"a": "a: the agent's tick", "b": "b: floor", "c": "c: python3 imports", "e": "e: design floor"}
for k in "abce":
    print(f"{names[k]:34} {med[k]*1000:9.2f} ms {cpu[k]*1000:8.2f} ms {rss[k]:6.1f} MiB")
ae, ab, ac = med["a"] / med["e"], med["a"] / med["b"], med["a"] / med["c"]
print(f"ratio a/e: {ae:.2f}x  (target <= 1.15x: {'met' if ae <= 1.15 else 'MISSED'})")
print(f"ratio a/b: {ab:.2f}x")
print(f"ratio a/c: {ac:.2f}x")
print(f"peak RSS of the agent: {rss['a']:.1f} MiB (target <= 20 MiB: {'met' if rss['a'] <= 20 else 'MISSED'})")
print(f"ratio e/b: {med['e'] / med['b']:.2f}x wall, {rss['e'] / rss['b']:.2f}x peak RSS (the design's own price)")
print(f"CPU per tick from /usr/bin/time (median user+sys): a {tcpu['a']*1000:.0f} ms, b {tcpu['b']*1000:.0f} ms, c {tcpu['c']*1000:.0f} ms, e {tcpu['e']*1000:.0f} ms (10 ms resolution)")
json.dump({"med": med, "cpu": cpu, "rss": rss}, open(w + "/tick.json", "w"))
PY

banner "phases of (a) and (e) the design floor, interleaved, MONKY_DEPLOYD_TRACE — $RUNS runs each"
"$BIN/phases" -runs "$RUNS" -json "$WORK/phases-ae.json" -a "$AGENT_CMD" -b "$DESIGN_CMD"
banner "phases of (a) and (b), interleaved — $RUNS runs each"
"$BIN/phases" -runs "$RUNS" -json "$WORK/phases.json" -a "$AGENT_CMD" -b "$FLOOR_CMD"
banner "phases of (e) the design floor and (b), interleaved — $RUNS runs each"
"$BIN/phases" -runs "$RUNS" -json "$WORK/phases-e.json" -a "$DESIGN_CMD" -b "$FLOOR_CMD"

banner "Go benchmarks"
echo "bundle verification (bundle.BenchmarkRead, 8 MiB tar of 100 files; target >= 500 MB/s):"
go test ./internal/bundle -run '^$' -bench '^BenchmarkRead$' -benchtime 2s -count 3 | grep -E '^Benchmark' | tee "$WORK/bundle.txt"
awk '{for (i=1;i<=NF;i++) if ($(i)=="MB/s") print $(i-1)}' "$WORK/bundle.txt" | sort -n | awk '{a[NR]=$1} END {m=a[int((NR+1)/2)]; printf "median %.0f MB/s (%s)\n", m, (m>=500?"met":"MISSED"); print m > "'"$WORK"'/bundle.median"}'
echo
echo "apply of a 100-file bundle, agent side (bench.BenchmarkApply100Files; target <= 50 ms):"
TMPDIR=$SHM go test ./test/bench -run '^$' -bench '^BenchmarkApply100Files$' -benchtime 50x -count 3 | grep -E '^Benchmark' | tee "$WORK/apply.txt"
python3 - "$WORK/apply.txt" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.startswith("Benchmark")]
def metric(name):
    return statistics.median(float(r[r.index(name) - 1]) for r in rows)
a, j, e = metric("agent-ms/apply"), metric("journal-ms/apply"), metric("effects-ms/apply")
print(f"median: tick wall minus effects {a:.1f} ms (target <= 50 ms: {'met' if a <= 50 else 'MISSED'}); "
      f"journal per-transition sum {j:.1f} ms, of which effects {e:.1f} ms")
open(sys.argv[1] + ".median", "w").write(f"{a}\n")
PY

banner "status and explain on a year's state file, as /usr/bin/monky-deployd runs them (target <= 15 ms)"
if [[ -f $YEAR_DIR/done && -f $YEAR_DIR/kit/config.yaml ]]; then
	echo "using the full year from make bench-year: $YEAR_DIR"
	grep -E '^year: (STATE FILE|applies|[0-9]+ ticks)' "$YEAR_DIR/done" || true
	grep -E '^year: STATE FILE' "$YEAR_DIR/done" | awk '{print $4}' >"$WORK/year.bytes" || true
	echo full >"$WORK/year.kind"
	YCFG=$YEAR_DIR/kit/config.yaml
else
	echo "no finished make bench-year run in $YEAR_DIR: a compressed year (2,200 applies, 4 ticks apart)"
	"$BIN/year" -ticks 8800 -applies 2200 -steps 0 -dir "$WORK/year" | tee "$WORK/year.txt" | grep -E '^year: (STATE FILE|applies|[0-9]+ ticks|explain keeps|one Compact)'
	grep -E '^year: STATE FILE' "$WORK/year.txt" | awk '{print $4}' >"$WORK/year.bytes" || true
	echo compressed >"$WORK/year.kind"
	YCFG=$WORK/year/kit/config.yaml
fi
# -i: status exits non-zero on a box that is not converged (the year ends on a refusal)
hyperfine -N -i --warmup 3 --runs "$RUNS" --style basic --export-json "$WORK/se.json" \
	-n status "$BIN/monky-deployd --config $YCFG status" \
	-n explain "$BIN/monky-deployd --config $YCFG explain" \
	-n "explain -n 2000" "$BIN/monky-deployd --config $YCFG explain -n 2000" >/dev/null
echo
echo "the state file's part of a heartbeat on that file, in process (store.BenchmarkHeartbeatStore):"
YSTATE=$(dirname "$YCFG")/../state/state.db
MONKY_BENCH_STATE=$YSTATE TMPDIR=$SHM go test ./store -run '^$' -bench '^BenchmarkHeartbeatStore$' -benchtime 30x -count 3 | grep -E '^Benchmark' | tee "$WORK/hbstore.txt"
python3 - "$WORK/hbstore.txt" <<'PY'
import json, statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.startswith("Benchmark")]
m = {k: statistics.median(float(r[2]) / 1e6 for r in rows if r[0].startswith("BenchmarkHeartbeatStore/" + k)) for k in ("receipt", "check")}
print(f"median: open + read + commit {m['receipt']:.2f} ms with the receipt, {m['check']:.2f} ms checking the whole file")
json.dump(m, open(sys.argv[1] + ".json", "w"))
PY
python3 - "$WORK/se.json" <<'PY'
import json, sys
for r in json.load(open(sys.argv[1]))["results"]:
    m = r["median"] * 1000
    target = "informational: the whole journal" if "-n" in r["command"] else ("target <= 15 ms: " + ("met" if m <= 15 else "MISSED"))
    print(f"{r['command']:18} median {m:6.2f} ms  ({target})")
PY

banner "every figure and its target"
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)
python3 - "$WORK" "$FLEET_RESULT" "$LOAD_BEFORE" "$LOAD_AFTER" "$AGENT_SIZE" "$FLOOR_SIZE" "$DESIGN_SIZE" <<'PY'
import json, os, sys
w, fleet_path, load_before, load_after, asize, fsize, esize = sys.argv[1:8]
def num(path):
    try:
        return float(open(path).read().split()[0])
    except (OSError, ValueError, IndexError):
        return None
tick = json.load(open(w + "/tick.json"))
ph = json.load(open(w + "/phases.json"))
pe = json.load(open(w + "/phases-e.json"))
pa = json.load(open(w + "/phases-ae.json"))
se = {r["command"]: r["median"] * 1000 for r in json.load(open(w + "/se.json"))["results"]}
rows = []
def row(name, value, target, ok):
    rows.append((name, value, target, "informational" if ok is None else ("met" if ok else "MISSED")))
med, rss = tick["med"], tick["rss"]
r = med["a"] / med["e"]
row("heartbeat tick / design floor, hyperfine medians", f"{med['a']*1000:.1f} / {med['e']*1000:.1f} ms = {r:.2f}x", "<= 1.15x", r <= 1.15)
r = pa["a"]["wall"] / pa["b"]["wall"]
row("  same, interleaved runs (phases)", f"{pa['a']['wall']:.1f} / {pa['b']['wall']:.1f} ms = {r:.2f}x", "<= 1.15x", r <= 1.15)
r = pa["a"]["cpu"] / pa["b"]["cpu"]
row("  CPU of a tick / design floor's (phases)", f"{pa['a']['cpu']:.1f} / {pa['b']['cpu']:.1f} ms = {r:.2f}x", "", None)
r = rss["a"] / rss["e"]
row("peak RSS of a tick / design floor's (time -v)", f"{rss['a']:.1f} / {rss['e']:.1f} MiB = {r:.2f}x", "<= 1.2x", r <= 1.2)
r = med["a"] / med["b"]
row("heartbeat tick / floor, hyperfine medians", f"{med['a']*1000:.1f} / {med['b']*1000:.1f} ms = {r:.2f}x", "", None)
r = ph["a"]["wall"] / ph["b"]["wall"]
row("  same, interleaved runs (phases)", f"{ph['a']['wall']:.1f} / {ph['b']['wall']:.1f} ms = {r:.2f}x", "", None)
r = ph["a"]["cpu"] / ph["b"]["cpu"]
row("  CPU of a tick / floor's (phases)", f"{ph['a']['cpu']:.1f} / {ph['b']['cpu']:.1f} ms = {r:.2f}x", "", None)
r = rss["a"] / rss["b"]
row("peak RSS of a tick / floor's (time -v)", f"{rss['a']:.1f} / {rss['b']:.1f} MiB = {r:.2f}x", "", None)
row("  of which the binary's pages (phases)", f"{ph['a']['file_mib']:.1f} / {ph['b']['file_mib']:.1f} MiB", "", None)
row("  of which heap and stacks (phases)", f"{ph['a']['anon_mib']:.1f} / {ph['b']['anon_mib']:.1f} MiB", "", None)
row("peak RSS of a tick", f"{rss['a']:.1f} MiB", "<= 20 MiB", rss["a"] <= 20)
row("binary size, agent / floor", f"{int(asize)/1048576:.1f} / {int(fsize)/1048576:.1f} MiB", "", None)
r, q = med["e"] / med["b"], pe["a"]["wall"] / pe["b"]["wall"]
row("design floor (e) / floor: tick, hyperfine; interleaved", f"{med['e']*1000:.1f} ms = {r:.2f}x; {q:.2f}x", "", None)
r = rss["e"] / rss["b"]
row("  its peak RSS / floor's: what the design's libraries cost", f"{rss['e']:.1f} MiB = {r:.2f}x", "", None)
row("  its binary's pages / heap and stacks (phases)", f"{pe['a']['file_mib']:.1f} / {pe['a']['anon_mib']:.1f} MiB", "", None)
row("  its binary size", f"{int(esize)/1048576:.1f} MiB", "", None)
row("heartbeat tick / design floor: the agent's own code", f"{med['a']/med['e']:.2f}x wall, {rss['a']/rss['e']:.2f}x RSS", "", None)
b = num(w + "/bundle.median")
row("bundle verification", f"{b:.0f} MB/s" if b else "-", ">= 500 MB/s", None if b is None else b >= 500)
a = num(w + "/apply.txt.median")
row("100-file apply, agent side", f"{a:.1f} ms" if a else "-", "<= 50 ms", None if a is None else a <= 50)
y = num(w + "/year.bytes")
kind = open(w + "/year.kind").read().strip() if os.path.exists(w + "/year.kind") else "?"
row(f"state file after the {kind} year", f"{y/1048576:.2f} MiB" if y else "-", "<= 4 MiB", None if y is None else y <= 4 * 1048576)
for cmd in ("status", "explain"):
    m = se.get(cmd)
    row(f"`{cmd}` on that file", f"{m:.1f} ms" if m else "-", "<= 15 ms", None if m is None else m <= 15)
try:
    hs = json.load(open(w + "/hbstore.txt.json"))
    row("  a heartbeat's state file work on it, receipt / check", f"{hs['receipt']:.2f} / {hs['check']:.2f} ms", "", None)
except (OSError, ValueError, KeyError):
    pass
try:
    f = json.load(open(fleet_path))
    n, mean = f["agents"], f["ideal_per_s"]
    row(f"fleet: agents against one simulator ({fleet_path})", f"{n}", ">= 10000", n >= 10000)
    row("  check-ins/s sustained", f"{f['sustained_per_s']:.1f} (ideal {mean:.1f})", f"~{mean:.0f}", abs(f["sustained_per_s"] - mean) <= 0.1 * mean)
    row("  busiest second / mean, settled", f"{f['peak_settled']} = {f['peak_settled']/mean:.2f}x", "<= 2x", f["peak_settled"] <= 2 * mean)
    row("  busiest second / mean, restart (first interval)", f"{f['peak_restart']} = {f['peak_restart']/mean:.2f}x", "<= 2x", f["peak_restart"] <= 2 * mean)
    row("  restart settled after", f"{f['settle_s']} s", "", None)
    row("  check-in latency p50 / p99", f"{f['latency_p50_ms']:.1f} / {f['latency_p99_ms']:.1f} ms", "", None)
    row("  CPU per check-in: agents / simulator", f"{f['agent_cpu_ms_per_checkin']:.2f} / {f['sim_cpu_ms_per_checkin']:.2f} ms", "", None)
    row("  load average during the fleet run", f["loadavg"], "", None)
except (OSError, ValueError, KeyError):
    row("fleet: 10,000 agents", "not run: make bench-fleet", ">= 10000", None)
wn = max(len(x[0]) for x in rows)
wv = max(len(x[1]) for x in rows)
print(f"{'figure':{wn}}  {'measured':{wv}}  {'target':12} ")
for name, value, target, verdict in rows:
    print(f"{name:{wn}}  {value:{wv}}  {target:12} {verdict if target else ''}")
print(f"load average (1, 5, 15 min): {load_before} before the run, {load_after} after it, on {os.cpu_count()} CPUs")
PY

banner "hostile verify: issue 37's cost classes against the budget (test/bench/hostile.sh)"
WORK=$WORK/hostile bash test/bench/hostile.sh
