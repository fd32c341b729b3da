# Performance figures (docs/PERFORMANCE.md).
#   make bench        the tick vs its floors, RSS, CPU, Go benchmarks, status/explain, binary size
#   make bench-hostile  the hostile-verify table alone (issue 37's cost classes; make bench ends with it)
#   make bench-year   525,600 heartbeat ticks and 5,000 applies in process (~25 min on 2 cores: ~3 ms of CPU a tick)
#   make bench-fleet  10,000 agents in loop mode against one simulator, checkin_interval_s 60, 1 % of
#                     them each unhealthy, refused by OpenBao or privileged; ends with the fleet table
#                     and fails unless its count per code is what was injected (~10 min)
BENCH_SHM := $(shell test -d /dev/shm -a -w /dev/shm && echo /dev/shm || echo $${TMPDIR:-/tmp})

.PHONY: bench bench-year bench-fleet bench-hostile

bench:
	bash test/bench/bench.sh

bench-hostile:
	bash test/bench/hostile.sh

bench-year:
	@mkdir -p $(BENCH_SHM)/monky-bench-year.out
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BENCH_SHM)/monky-bench-year.out/year ./test/bench/year
	$(BENCH_SHM)/monky-bench-year.out/year -dir $(BENCH_SHM)/monky-bench-year -steps 20 | tee $(BENCH_SHM)/monky-bench-year.out/year.txt
	@grep -q '^year: config for status' $(BENCH_SHM)/monky-bench-year.out/year.txt || { echo "bench-year: the run did not finish" >&2; exit 1; }
	cp $(BENCH_SHM)/monky-bench-year.out/year.txt $(BENCH_SHM)/monky-bench-year/done

bench-fleet:
	@mkdir -p $(BENCH_SHM)/monky-bench-fleet.out
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BENCH_SHM)/monky-bench-fleet.out/fleet ./test/bench/fleet
	bash -o pipefail -c '$(BENCH_SHM)/monky-bench-fleet.out/fleet -dir $(BENCH_SHM)/monky-bench-fleet -result $(BENCH_SHM)/monky-bench-fleet.json | tee $(BENCH_SHM)/monky-bench-fleet.out/fleet.txt'
	rm -rf $(BENCH_SHM)/monky-bench-fleet
