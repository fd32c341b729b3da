# The sdk build through a real OpenZiti network (docs/TESTING.md, "mesh-e2e"):
#   make mesh-e2e   the controller and router (`ziti edge quickstart`) on 127.0.0.1 only, the
#                   simulator's tenancy and OpenBao as router-hosted services, the box's identity
#                   enrolled; the sdk build applies v1, heartbeats and applies v2 through the mesh;
#                   mesh faults; then the sdk build with the race detector (make sdk-race) loops
#   make bench-mesh the heartbeat through that mesh over `transport: sdk` against `transport: proxy`
#                   (`ziti tunnel proxy`, as monky-deployd-proxy.service runs it): median wall, CPU
#                   and peak RSS of each (docs/PERFORMANCE.md); MESH_BENCH_ROUNDS (default 20)
# The ziti binary is built once from the vendored source tarball (third_party/openziti/ziti in
# ../shared; never downloaded) into $(MESH_CACHE)/<sha256 of the tarball, 16 hex>/bin/ziti;
# ZITI=<binary> uses another.
MESH_CACHE ?= $(shell $(GO) env GOCACHE)/../monky-ziti

.PHONY: mesh-e2e bench-mesh
mesh-e2e: sdk sdk-race build
	SDK_BIN=$(abspath $(SDK_BIN)) SDK_RACE_BIN=$(abspath $(SDK_RACE_BIN)) SIM_BIN=$(abspath $(BIN))/monky-sim MESH_CACHE=$(abspath $(MESH_CACHE)) bash test/mesh/run.sh

MESH_BENCH_ROUNDS ?= 20
bench-mesh: sdk build
	MESH_BENCH=$(MESH_BENCH_ROUNDS) SDK_BIN=$(abspath $(SDK_BIN)) SIM_BIN=$(abspath $(BIN))/monky-sim MESH_CACHE=$(abspath $(MESH_CACHE)) bash test/mesh/run.sh
