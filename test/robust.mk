# Robustness suite (docs/RELIABILITY.md).
#   make crash   the full crash matrix: every failpoint in both scenarios, every ordered
#                pair of points as a double fault
#   make fuzz    every Fuzz* target of the tree for FUZZTIME each (default 30s)
#   make soak    the robustness tests SOAK_COUNT times over (default 5)
# The corpus in each package's testdata/fuzz/ is replayed by plain `go test` (make unit).

FUZZTIME ?= 30s
SOAK_COUNT ?= 5

.PHONY: crash fuzz soak

crash:
	MONKY_CRASH_FULL=1 $(GO) test -count=1 -timeout 60m -run 'TestCrashMatrix' -v ./test/robust/ | grep -E 'crash matrix|^(ok|FAIL|---)'

fuzz:
	@set -e; for f in $$(grep -rl --include='*_test.go' '^func Fuzz' . | sort); do \
		pkg=./$$(dirname $$f); \
		for t in $$(grep -h '^func Fuzz' $$f | sed 's/^func \(Fuzz[A-Za-z0-9_]*\).*/\1/'); do \
			echo "fuzz $$pkg $$t ($(FUZZTIME))"; \
			$(GO) test $$pkg -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME); \
		done; \
	done

soak:
	$(GO) test -count=$(SOAK_COUNT) -timeout 60m ./test/robust/
