#!/usr/bin/env bash
# make fuzz: every Fuzz* target of the tree for FUZZTIME each (docs/RELIABILITY.md "Fuzzing").
#
# Go before 1.27 can end a duration-bound fuzz run with a bare "context deadline exceeded" at the
# -fuzztime boundary when its workers are starved of CPU (golang/go#75804): no input failed and
# none is written. A real finding always writes its input under testdata/fuzz/ and says
# "Failing input written to". A run that ends with the bare boundary error and wrote no input is
# run again, twice at most; anything else fails at once.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
FUZZTIME=${FUZZTIME:-30s}

boundary_only() { # $1: the run's output
	grep -q '^    context deadline exceeded$' "$1" && ! grep -qE 'Failing input written to|^panic:' "$1"
}

out=$(mktemp)
trap 'rm -f "$out"' EXIT
mapfile -t files < <(grep -rl --include='*_test.go' '^func Fuzz' . | sort)
for f in "${files[@]}"; do
	pkg=./$(dirname "$f")
	mapfile -t targets < <(grep -h '^func Fuzz' "$f" | sed 's/^func \(Fuzz[A-Za-z0-9_]*\).*/\1/')
	for t in "${targets[@]}"; do
		for try in 1 2 3; do
			echo "fuzz $pkg $t ($FUZZTIME)"
			st=0
			$GO test "$pkg" -run '^$' -fuzz "^$t\$" -fuzztime "$FUZZTIME" >"$out" 2>&1 || st=$?
			cat "$out"
			[ "$st" -eq 0 ] && break
			if [ "$try" -lt 3 ] && boundary_only "$out"; then
				echo "fuzz $pkg $t: stopped at the -fuzztime boundary with no failing input (golang/go#75804): run again"
				continue
			fi
			exit "$st"
		done
	done
done
