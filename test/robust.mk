# Robustness suite (docs/RELIABILITY.md).
#   make crash   the full crash matrix: every failpoint in the three scenarios, every ordered
#                pair of points as a double fault, 240 seeded triple faults, the crash
#                families, file:token-written 200 times in a row, and 200 power-loss double
#                faults through the CrashFS seam (CI runs it)
#   make fuzz    every Fuzz* target of the tree for FUZZTIME each (default 30s): test/fuzz.sh
#   make soak    the chaos soak: SOAK_TICKS ticks (default 300) of the real agent against
#                monky-sim and the docker stub under a schedule of faults seeded by SOAK_SEED
#                (default 1); SOAK_ROUNDS rounds (default 1), round r with seed SOAK_SEED+r-1
# The corpus in each package's testdata/fuzz/ is replayed by plain `go test` (make unit).

FUZZTIME ?= 30s
SOAK_TICKS ?= 300
SOAK_SEED ?= 1
SOAK_ROUNDS ?= 1
# a guard against a hang, not a figure: .ci/run runs the matrix beside the engine lane's suites
CRASH_TIMEOUT ?= 60m

.PHONY: crash fuzz soak

# $(call filtered,command,pattern): run command, print the lines matching pattern, keep its status
filtered = out=$$(mktemp); st=0; $(1) >$$out 2>&1 || st=$$?; grep -E '$(2)' $$out || true; \
	[ $$st -eq 0 ] || tail -n 40 $$out; rm -f $$out; exit $$st

crash:
	@$(call filtered,MONKY_CRASH_FULL=1 MONKY_CRASH_REPEAT=200 $(GO) test -count=1 -timeout $(CRASH_TIMEOUT) \
		-run '^(TestCrashMatrix|TestCrashFamilies|TestTimingPointsRepeated)$$' -v ./test/robust/,crash (matrix|families)|timing point|^(ok|FAIL|---))
	@$(call filtered,MONKY_POWERLOSS_FULL=1 $(GO) test -count=1 -timeout $(CRASH_TIMEOUT) -run '^TestPowerLossDoubleFault$$' -v ./states/,power-loss|^(ok|FAIL|---))

fuzz:
	@FUZZTIME=$(FUZZTIME) GO=$(GO) bash test/fuzz.sh

soak:
	@for r in $$(seq 1 $(SOAK_ROUNDS)); do \
		seed=$$(( $(SOAK_SEED) + r - 1 )); \
		echo "soak round $$r of $(SOAK_ROUNDS): SOAK_TICKS=$(SOAK_TICKS) SOAK_SEED=$$seed"; \
		( $(call filtered,SOAK_TICKS=$(SOAK_TICKS) SOAK_SEED=$$seed $(GO) test -count=1 -timeout 0 -run '^TestSoak$$' -v ./test/robust/,soak|^(ok|FAIL|---)) ) || exit 1; \
	done
