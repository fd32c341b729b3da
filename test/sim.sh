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
trap 'stop_sim; [[ -n "${KEEP_WORK:-}" ]] || rm -rf "$WORK"' EXIT
trap 'exit 130' INT TERM
