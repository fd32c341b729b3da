# shellcheck shell=bash
# Sourced by test/demo.sh, test/bench/bench.sh and testdata/traces/record.sh once WORK names
# their temporary directory. A script that starts monky-sim in the background keeps its pid in
# SIM_PID; stop_sim stops it (if it still runs). Whichever way the script ends, the simulator
# is stopped and WORK removed (kept when KEEP_WORK is set).
SIM_PID=""
stop_sim() {
	if [[ -n "$SIM_PID" ]] && kill -0 "$SIM_PID" 2>/dev/null; then
		kill "$SIM_PID" 2>/dev/null || true
		wait "$SIM_PID" 2>/dev/null || true
	fi
	SIM_PID=""
}
# wait_sim ADDR_FILE LOG: waits up to 10 s for the simulator (SIM_PID) to write its address
# file; when it stops first, or writes none, says so (with its LOG) and fails.
wait_sim() {
	for _ in $(seq 1 100); do
		[[ -s "$1" ]] && return 0
		if ! kill -0 "$SIM_PID" 2>/dev/null; then
			echo "$(basename "$0"): the simulator stopped at start:" >&2
			cat "$2" >&2
			return 1
		fi
		sleep 0.1
	done
	echo "$(basename "$0"): the simulator wrote no address file within 10 s" >&2
	return 1
}
trap 'stop_sim; [[ -n "${KEEP_WORK:-}" ]] || rm -rf "$WORK"' EXIT
trap 'exit 130' INT TERM
