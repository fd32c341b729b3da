#!/usr/bin/env bash
# The hostile-verify table of `make bench` (docs/PERFORMANCE.md; run alone: make bench-hostile):
# issue 37's cost classes (test/hostile, generated: 2,000 aliases of a 400 KiB scalar; 100,000
# one-byte aliases; 99,000 aliases of a 600 KiB scalar; 46,000 services in 1 MiB; 100 levels of
# nesting; a 1 MiB block scalar; 1 MiB of one-byte list items), each checked by `check bundle`
# and by a tick (`run --once` against monky-sim, desired after a heartbeat of the applied demo
# release), the agent as the package ships it (`make agent`), with MONKY_DEPLOYD_TRACE set:
# the agent's own peak RSS (phase's memory line), the loader child's wall, CPU and peak RSS
# (internal/budget's trace line), the whole command's wall and CPU (/usr/bin/time), and the
# verdict. Each must stay within 10 s of CPU and 64 MiB above the heartbeat's RSS. Then the
# support readers: explain on copies (the box's own, forged meta pages, a 1 GiB sparse file, a
# FIFO), each within 10 s of CPU and 128 MiB.
#
# Environment: WORK (a directory to use; default a new one, removed at the end).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/../.."
SHM=/dev/shm
[[ -d $SHM && -w $SHM ]] || SHM=${TMPDIR:-/tmp}
ENV_ID=env-demo-01
WORK=${WORK:-$(mktemp -d "$SHM/monky-hostile.XXXXXX")}
# shellcheck source=test/sim.sh
source test/sim.sh
[[ -x /usr/bin/time ]] || { echo "bench-hostile: /usr/bin/time is missing: apt-get install -y time" >&2; exit 1; }

BIN=$WORK/bin
mkdir -p "$BIN"
make --no-print-directory agent BIN="$BIN" >/dev/null
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$BIN/monky-sim" ./cmd/monky-sim
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$BIN/docker" ./test/fakedocker
CGO_ENABLED=0 go build -trimpath -o "$BIN/gen" ./test/hostile/gen
REL=$WORK/releases
mkdir -p "$REL"
cp -r testdata/demo/. "$REL/"
"$BIN/gen" -out "$REL" -env "$ENV_ID" >"$WORK/cases.tsv"

export FAKE_DOCKER_STATE=$BIN/docker.state
mkdir -p "$FAKE_DOCKER_STATE"
KIT=$WORK/kit
"$BIN/monky-sim" serve --releases "$REL" --env "$ENV_ID" --kit "$KIT" --addr-file "$WORK/addr.json" \
	--state-dir "$WORK/state" --docker-bin "$BIN/docker" --desire v1 --quiet >"$WORK/sim.log" 2>&1 &
SIM_PID=$!
for _ in $(seq 1 200); do [[ -s $WORK/addr.json ]] && break; sleep 0.05; done
[[ -s $WORK/addr.json ]] || { echo "bench-hostile: monky-sim did not start" >&2; cat "$WORK/sim.log" >&2; exit 1; }
AGENT=("$BIN/monky-deployd" --config "$KIT/config.yaml")
"${AGENT[@]}" run --once 2>"$WORK/apply.log" || { echo "bench-hostile: the apply of v1 failed" >&2; cat "$WORK/apply.log" >&2; exit 1; }

# measure NAME KIND command...: one line of figures into $WORK/rows
measure() {
	local name=$1 kind=$2
	shift 2
	local st=0
	MONKY_DEPLOYD_TRACE=1 /usr/bin/time -f 'time %e %U %S %M' "$@" >"$WORK/out" 2>"$WORK/err" || st=$?
	local verdict
	local words='(BUNDLE_INVALID|PRIVILEGED_REFUSED)'
	if [[ $kind == "explain copy" ]]; then
		words='(is not a state file|is corrupt|neither meta page)' # a copy's journal holds the refusals above
	fi
	verdict=$(grep -ohE "$words"'[^"]{0,90}' "$WORK/out" "$WORK/err" | head -1 || true)
	if [[ -z $verdict ]]; then
		if [[ $st -eq 0 ]]; then verdict=ok; else verdict="exit $st"; fi
	fi
	awk -v name="$name" -v kind="$kind" -v verdict="$verdict" '
		/^loader / {lw+=$4; lc+=$6; if ($8>lr) lr=$8}
		/^memory VmHWM/ {pr=$3}
		/^time / {w=$2; c=$3+$4; m=$5}
		END {if (pr == "") pr = m; printf "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", name, kind, w, c, pr, lw, lc, lr, verdict}' "$WORK/err" >>"$WORK/rows"
}

: >"$WORK/rows"
measure heartbeat tick "${AGENT[@]}" run --once
while IFS=$'\t' read -r name _ dir; do
	measure "$name" "check bundle" "${AGENT[@]}" check bundle "$dir"
	"$BIN/monky-sim" desire --env "$ENV_ID" --release "$name" --addr-file "$WORK/addr.json" >/dev/null
	measure "$name" tick "${AGENT[@]}" run --once
done <"$WORK/cases.tsv"
stop_sim

# The support desk's readers on copies from boxes nobody trusts (issue 47): `explain
# --state-file` on the box's own file, on a copy whose meta pages are forged to name a
# gigabyte of pages, on a 1 GiB sparse file and on a FIFO. Each is read or refused within the
# readers' bound (128 MiB, 10 s of CPU); none may hang (timeout 60 s).
STATE_DIR=$(sed -n 's/^state_dir: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "$KIT/config.yaml")
COPIES=$WORK/copies
mkdir -p "$COPIES"
cp "$STATE_DIR/state.db" "$COPIES/box.db"
python3 - "$COPIES/box.db" "$COPIES/forged.db" <<'PY'
import struct, sys
raw = bytearray(open(sys.argv[1], "rb").read())
def fnv64a(b):
    h = 0xcbf29ce484222325
    for c in b:
        h = ((h ^ c) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h
page = struct.unpack_from("<I", raw, 16 + 8)[0]
for off in (0, page):
    m = off + 16
    struct.pack_into("<Q", raw, m + 40, (1 << 30) // page)  # the high-water mark: 1 GiB of pages
    struct.pack_into("<Q", raw, m + 56, fnv64a(bytes(raw[m:m + 56])))
open(sys.argv[2], "wb").write(raw)
PY
truncate -s 1G "$COPIES/sparse.db"
mkfifo "$COPIES/fifo.db"
for c in box forged sparse fifo; do
	measure "copy:$c" "explain copy" timeout 60 "$BIN/monky-deployd" explain --state-file "$COPIES/$c.db"
done

python3 - "$WORK/rows" "$WORK/cases.tsv" "$(cut -d' ' -f1-3 /proc/loadavg)" <<'PY'
import sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
about = {l.split("\t")[0]: l.split("\t")[1] for l in open(sys.argv[2]) if l.strip()}
def f(x):
    try:
        return float(x)
    except ValueError:
        return None
hb = rows[0]
hb_rss = f(hb[4]) / 1024
print(f"heartbeat tick: {f(hb[2]):.2f} s wall, {f(hb[3]):.2f} s CPU, peak RSS {hb_rss:.1f} MiB (the agent's own); loader children: {'none' if hb[5] == '' else hb[5] + ' ms'}")
print(f"{'case':<20} {'run':<13} {'wall s':>7} {'CPU s':>6} {'agent MiB':>9} {'loader MiB':>10} {'loader CPU s':>12} {'within':>7}  verdict")
bad = 0
for r in rows[1:]:
    name, kind, wall, cpu, prss, lwall, lcpu, lrss, verdict = r
    parent = (f(prss) or 0) / 1024
    child = (f(lrss) or 0) / 1024
    if kind == "explain copy":  # a reader: its own bound, 128 MiB and 10 s of CPU, on any copy
        ok = f(cpu) is not None and f(cpu) <= 10 and parent <= 128 and verdict != "exit 124"
    else:
        ok = f(cpu) is not None and f(cpu) <= 10 and child - hb_rss <= 64 and parent - hb_rss <= 64
    bad += not ok
    lc = f"{f(lcpu) / 1000:.2f}" if f(lcpu) is not None else "-"
    print(f"{name:<20} {kind:<13} {f(wall):7.2f} {f(cpu):6.2f} {parent:9.1f} {child:10.1f} {lc:>12} {'yes' if ok else 'NO':>7}  {verdict}")
print("within: ≤ 10 s of CPU (agent and loader together) and each process ≤ 64 MiB above the heartbeat's peak RSS; a reader of a copy ≤ 10 s of CPU and 128 MiB, never hung")
print(f"load average (1, 5, 15 min) after the run: {sys.argv[3]}")
sys.exit(1 if bad else 0)
PY
