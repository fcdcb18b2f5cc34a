# The make targets are nodepool's interface: CI runs `make lint`, `make test` and `make image-verify`.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c

ROOT := $(CURDIR)
BIN := $(ROOT)/bin
CONTROLLER_GEN_VERSION := v0.23.0
CONTROLLER_GEN := $(BIN)/controller-gen-$(CONTROLLER_GEN_VERSION)
# promtool and promql-series (the PromQL parser) test config/prometheus; the
# version is Prometheus's module version in hack/tools/promtool/go.mod.
# remove_all_sd leaves out every service-discovery SDK (AWS, Azure, GCE, ...):
# rule tests and the PromQL parser need none, and the build takes minutes less.
PROMETHEUS_VERSION := v0.316.0
PROMTOOL := $(BIN)/promtool-$(PROMETHEUS_VERSION)
PROMQL_SERIES := $(BIN)/promql-series-$(PROMETHEUS_VERSION)
# A real Prometheus server (the same module, the same tag) and the
# Prometheus Operator's configuration generator (scrape-config, the
# operator's module version in hack/tools/prometheus-operator/go.mod):
# test/install scrapes nodepool with the jobs the operator makes of the
# shipped ServiceMonitors.
PROMETHEUS := $(BIN)/prometheus-$(PROMETHEUS_VERSION)
PROMETHEUS_OPERATOR_VERSION := v0.91.0
SCRAPE_CONFIG := $(BIN)/scrape-config-$(PROMETHEUS_OPERATOR_VERSION)
# The scenario engine's random interleavings: make test runs the fixed
# seeds and SIM_ROTATE_COUNT more drawn from SIM_ROTATE (the commit), so
# every commit explores interleavings no one ran before; the test prints
# them and a failing one prints its replay command.
SIM_ROTATE ?= $(REVISION)
SIM_ROTATE_COUNT ?= 50
# Extra flags for go test, e.g. make test TESTFLAGS='-run TestHarness -v'.
TESTFLAGS ?=
TEST_TIMEOUT ?= 40m
# Test packages run at once: the real-stack suites (test/integration,
# test/cli, test/gates, test/inplace, test/install) mostly wait on
# rollouts, so four share 2 cores. The longest start first (go test starts
# packages in the order given): a long suite started last would be the
# run's whole length.
TEST_PACKAGES ?= 4
LONG_TEST_PACKAGES := ./test/integration ./test/gates ./test/cli ./internal/scenario ./test/install ./test/inplace ./test/drain
# Flags of the payload-server benchmark (go run ./hack/bench/payloadserver -h).
PAYLOAD_BENCHFLAGS ?=

# What a build says it is (`nodepool version`, the image labels) and where
# its image goes. make release needs a semver VERSION: make release VERSION=v0.1.0.
# Read once, when make starts (:=), so every step of one run names the same
# build even if a commit lands meanwhile.
ifeq ($(origin VERSION),undefined)
VERSION := $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
endif
ifeq ($(origin REVISION),undefined)
REVISION := $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
endif
IMAGE_REPO ?= ghcr.io/nodepool-dev/nodepool
SOURCE_URL ?= https://github.com/nodepool-dev/nodepool
IMAGE_PLATFORMS ?= linux/amd64,linux/arm64
PLUGIN_PLATFORMS ?= linux/amd64,linux/arm64,darwin/amd64,darwin/arm64
DIST ?= $(ROOT)/dist
# The commit's time is the image's and the archives': one commit, one digest.
ifeq ($(origin SOURCE_DATE_EPOCH),undefined)
SOURCE_DATE_EPOCH := $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
endif
LDFLAGS := -X nodepool.dev/nodepool/internal/version.version=$(VERSION) -X nodepool.dev/nodepool/internal/version.revision=$(REVISION)
DIST_FLAGS = --version $(VERSION) --revision $(REVISION) --repository $(IMAGE_REPO) --source $(SOURCE_URL) \
	--platforms $(IMAGE_PLATFORMS) --out $(DIST)

.PHONY: all
all: build

.PHONY: help
help: ## Show the targets.
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

$(CONTROLLER_GEN):
	@mkdir -p $(BIN)
	cd hack/tools/controller-gen && go build -o $(CONTROLLER_GEN) sigs.k8s.io/controller-tools/cmd/controller-gen

.PHONY: controller-gen
controller-gen: $(CONTROLLER_GEN)

$(PROMTOOL):
	@mkdir -p $(BIN)
	cd hack/tools/promtool && go build -tags remove_all_sd -o $(PROMTOOL) github.com/prometheus/prometheus/cmd/promtool

# Rebuilt when its source changes (its name is the Prometheus version's).
$(PROMQL_SERIES): hack/tools/promtool/promql-series/main.go
	@mkdir -p $(BIN)
	cd hack/tools/promtool && go build -tags remove_all_sd -o $(PROMQL_SERIES) ./promql-series

$(PROMETHEUS):
	@mkdir -p $(BIN)
	cd hack/tools/promtool && go build -tags remove_all_sd -o $(PROMETHEUS) github.com/prometheus/prometheus/cmd/prometheus

$(SCRAPE_CONFIG): hack/tools/prometheus-operator/scrape-config/main.go
	@mkdir -p $(BIN)
	cd hack/tools/prometheus-operator && go build -o $(SCRAPE_CONFIG) ./scrape-config

.PHONY: promtool
promtool: $(PROMTOOL) $(PROMQL_SERIES) $(PROMETHEUS) $(SCRAPE_CONFIG) ## Build promtool, promql-series, a Prometheus server and the Prometheus Operator's scrape-config (the tests of config/prometheus) into bin/ (once).

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Regenerate deepcopy code and CRDs, and their copies in the Helm chart (commit the result).
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./api/...
	$(CONTROLLER_GEN) crd paths=./api/... output:crd:artifacts:config=config/crd/bases
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./internal/sim/api/...
	$(CONTROLLER_GEN) crd paths=./internal/sim/api/... output:crd:artifacts:config=config/sim/crd/bases
	$(CONTROLLER_GEN) rbac:roleName=nodepool-sim-provider paths=./internal/sim/... output:rbac:artifacts:config=config/sim/rbac
	$(CONTROLLER_GEN) rbac:roleName=nodepool-controller paths=./internal/controller/... output:rbac:artifacts:config=config/rbac
	rm -f charts/nodepool/crds/*.yaml
	cp config/crd/bases/*.yaml charts/nodepool/crds/
	cp config/rbac/role.yaml charts/nodepool/files/role.yaml
	cp config/prometheus/prometheusrule.yaml config/prometheus/dashboard.json charts/nodepool/files/
	rm -f internal/capi/crds/*.yaml
	cp "$$(go list -m -f '{{.Dir}}' sigs.k8s.io/cluster-api)"/core/config/crd/bases/*.yaml internal/capi/crds/
	chmod 644 internal/capi/crds/*.yaml

.PHONY: control-plane
control-plane: ## Build kube-apiserver and etcd for tests into bin/k8s/ (once).
	@hack/tools/build-control-plane.sh >/dev/null

.PHONY: build
# The plugin is built as the release builds it: static (a cgo build is
# 55 MB, this one 33) and without symbols.
build: ## Build the nodepool binary and the kubectl plugin (its own binary, with its completion script kubectl_complete-nodepool) into bin/.
	go build -ldflags "$(LDFLAGS)" -o $(BIN)/nodepool ./cmd/nodepool
	rm -f $(BIN)/kubectl-nodepool
	CGO_ENABLED=0 go build -ldflags "-s -w $(LDFLAGS)" -o $(BIN)/kubectl-nodepool ./cmd/kubectl-nodepool
	install -m 0755 cmd/kubectl-nodepool/kubectl_complete-nodepool $(BIN)/kubectl_complete-nodepool

.PHONY: image
image: ## Build the OCI image offline (no Docker) into dist/: image/ (OCI layout), nodepool-image.oci.tar (it as one file) and a docker tarball per platform.
	SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) go run ./hack/image $(DIST_FLAGS)

.PHONY: image-verify
image-verify: image ## Check that Debian's skopeo copy and containerd's import (kind load) keep the image's pinned digest (installs skopeo and containerd with apt-get when missing).
	hack/image-verify.sh $(DIST) $(IMAGE_REPO) $(VERSION)

.PHONY: release
release: ## Write a release into dist/ (make release VERSION=v0.1.0): nodepool.yaml pinned by digest, the Helm chart, image, plugin archives, krew manifest, checksums.
	SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) go run ./hack/release $(DIST_FLAGS) --plugin-platforms $(PLUGIN_PLATFORMS)

.PHONY: clusterctl-repository
clusterctl-repository: ## Write nodepool as a local clusterctl provider repository (dist/clusterctl-repository; CLUSTERCTL_VERSION=v0.1.0) for clusterctl init --addon nodepool.
	go run ./hack/clusterctl --out dist/clusterctl-repository --version $(or $(CLUSTERCTL_VERSION),v0.1.0) --image $(IMAGE_REPO):$(VERSION)

.PHONY: test
# The fuzz targets run beside the tests, at a lower CPU priority: their
# instrumented builds take the cores the real-stack suites leave idle. A
# target whose run ends in Go's own "context deadline exceeded" (its
# coordinator racing the -fuzztime deadline while a worker is slow, with no
# failing input found) runs once more; a failing input is saved under
# testdata/fuzz, so a real failure fails again. They build with the tag
# fuzzonly (FUZZ_TAGS): a fuzz build instruments every package the test
# binary links, and the tests of the real stack beside a fuzz target
# (//go:build !fuzzonly) would link some 500 packages more (826 instead of
# 1,334 packages compiled twice on a fresh clone).
test: control-plane $(CONTROLLER_GEN) $(PROMTOOL) $(PROMQL_SERIES) $(PROMETHEUS) $(SCRAPE_CONFIG) ## Run every test against a real API server (builds what it needs).
	@fuzzlog=$$(mktemp); rc=0; frc=0; \
	( for t in $(FUZZ_TARGETS); do \
		case "$${t##*:}" in FuzzParseConfig) ft=20s ;; *) ft=10s ;; esac; \
		echo "go test -tags $(FUZZ_TAGS) $${t%%:*} -run '^$$' -fuzz '^$${t##*:}$$' -fuzztime $$ft"; \
		one=$$(mktemp); \
		if ! nice -n 10 go test -tags $(FUZZ_TAGS) "$${t%%:*}" -run '^$$' -fuzz "^$${t##*:}\$$" -fuzztime "$$ft" >"$$one" 2>&1; then \
			cat "$$one"; \
			grep -q 'Failing input written to' "$$one" || ! grep -q 'context deadline exceeded' "$$one" && exit 1; \
			echo "again: Go's fuzz coordinator reported its own deadline, no failing input (a found one would fail again)"; \
			nice -n 10 go test -tags $(FUZZ_TAGS) "$${t%%:*}" -run '^$$' -fuzz "^$${t##*:}\$$" -fuzztime "$$ft" || exit 1; \
		else cat "$$one"; fi; rm -f "$$one"; \
	done ) >"$$fuzzlog" 2>&1 & fuzz=$$!; \
	echo "go test $(LONG_TEST_PACKAGES) ./... (the fuzz targets beside it)"; \
	NODEPOOL_ASSETS="$$(hack/tools/build-control-plane.sh --print-dir)" \
	CONTROLLER_GEN="$(CONTROLLER_GEN)" PROMTOOL="$(PROMTOOL)" PROMQL_SERIES="$(PROMQL_SERIES)" \
	PROMETHEUS="$(PROMETHEUS)" SCRAPE_CONFIG="$(SCRAPE_CONFIG)" \
	NODEPOOL_SIM_ROTATE="$(SIM_ROTATE)" NODEPOOL_SIM_ROTATE_COUNT="$(SIM_ROTATE_COUNT)" \
	go test -timeout $(TEST_TIMEOUT) -p $(TEST_PACKAGES) -parallel 4 $(TESTFLAGS) $(LONG_TEST_PACKAGES) \
		$$(go list ./... | grep -vxF $(foreach p,$(LONG_TEST_PACKAGES),-e nodepool.dev/nodepool/$(p:./%=%))) || rc=$$?; \
	wait $$fuzz || frc=$$?; cat "$$fuzzlog"; rm -f "$$fuzzlog"; \
	if [ $$frc -ne 0 ]; then echo "a fuzz target failed (above)"; fi; \
	[ $$rc -eq 0 ] && [ $$frc -eq 0 ]

FUZZTIME ?= 5m
FUZZ_TAGS := fuzzonly
# Every fuzz target of the repository, as <package>:<name>, found by its
# declaration (func FuzzX in a _test.go file), so a new one is run too.
FUZZ_TARGETS = $(shell git grep --untracked -nE '^func Fuzz[A-Za-z0-9_]+' -- '*_test.go' | \
	sed -E 's,^(.*)/[^/]+_test[.]go:[0-9]+:func (Fuzz[A-Za-z0-9_]*).*,./\1:\2,')

.PHONY: fuzz
fuzz: ## Run every fuzz target of the repository (func Fuzz*), FUZZTIME=5m each.
	@test -n "$(FUZZ_TARGETS)" || { echo "no fuzz targets found"; exit 1; }
	@for t in $(FUZZ_TARGETS); do \
		echo "go test -tags $(FUZZ_TAGS) $${t%%:*} -run '^$$' -fuzz '^$${t##*:}$$' -fuzztime $(FUZZTIME)"; \
		go test -tags $(FUZZ_TAGS) "$${t%%:*}" -run '^$$' -fuzz "^$${t##*:}\$$" -fuzztime "$(FUZZTIME)"; \
	done

# Fleet sizes of the fleet benchmark, comma-separated (1000,10000 adds the
# 10,000-pool fleet: ten namespaces of 1,000 pools or fewer, more than an
# hour on a busy 2-core machine).
NODEPOOL_BENCH_POOLS ?= 1000
# Shapes each fleet is measured in: clusters (Clusters of 1 to 8 pools, a
# fixed seeded draw, as real fleets are shaped) and one-cluster (the shape
# before: one Cluster holds a namespace's 1,000 pools), both reported for
# one release.
NODEPOOL_BENCH_SHAPES ?= clusters,one-cluster
# Machines each pool of the fleet and of the fleet rollout runs.
NODEPOOL_BENCH_POOL_MACHINES ?= 2
# Fleet sizes of the fleet rollout benchmark, comma-separated, each its own
# fleet (300,1000,3000: the per-pool figures should stay flat).
NODEPOOL_BENCH_FLEETROLLOUT_POOLS ?= 300
# Shard counts each fleet is measured with, comma-separated: it settles
# under the first; each further count restarts the controller as that many
# shards (namespaces dealt round-robin) on the settled fleet.
NODEPOOL_BENCH_SHARDS ?= 1,2,4

.PHONY: bench
bench: control-plane ## Benchmarks: payload render + hashes, the forecast at 100/1,000/10,000 pools (and of a FleetRollout over 100 to 10,000) and its error on random fleets, payload server throughput, 500 simulated machines to Running, the fleet in both shapes (table + bin/bench/summary.json), a NodePool's stored size and status patch cost, fleet.Decide and a FleetRollout reconcile at 300/1,000/3,000 pools, a fleet rollout (NODEPOOL_BENCH_FLEETROLLOUT_POOLS).
	go test ./internal/payload -run '^$$' -bench BenchmarkRender -benchmem
	go test ./internal/scenario -run '^$$' -bench 'Benchmark(Fleet)?Forecast' -benchtime 1x -timeout 30m
	@echo "the forecast's error on the scenario engine's random fleets (TestTheForecastsErrorOnRandomFleets):"; \
	out=$$(go test ./internal/scenario -run '^TestTheForecastsErrorOnRandomFleets$$' -count=1 -v 2>&1) || { echo "$$out"; exit 1; }; \
	echo "$$out" | grep -E 'pools: median|^ok'
	go run ./hack/bench/payloadserver $(PAYLOAD_BENCHFLAGS)
	NODEPOOL_ASSETS="$$(hack/tools/build-control-plane.sh --print-dir)" \
	go test ./test/bench -run '^$$' -bench BenchmarkSimScale -benchtime 1x -timeout 40m
	NODEPOOL_ASSETS="$$(hack/tools/build-control-plane.sh --print-dir)" NODEPOOL_BENCH_POOLS="$(NODEPOOL_BENCH_POOLS)" \
	NODEPOOL_BENCH_SHARDS="$(NODEPOOL_BENCH_SHARDS)" NODEPOOL_BENCH_SHAPES="$(NODEPOOL_BENCH_SHAPES)" \
	NODEPOOL_BENCH_POOL_MACHINES="$(NODEPOOL_BENCH_POOL_MACHINES)" NODEPOOL_BENCH_OUT="$(BIN)/bench" \
	go test ./test/bench -run '^$$' -bench 'BenchmarkFleet$$' -benchtime 1x -timeout 600m
	NODEPOOL_ASSETS="$$(hack/tools/build-control-plane.sh --print-dir)" \
	go test ./test/bench -run '^$$' -bench BenchmarkNodePoolStatusPatch -benchtime 1x -timeout 30m
	go test ./internal/fleet -run '^$$' -bench BenchmarkDecide -benchmem
	go test ./internal/controller -run '^$$' -bench BenchmarkFleetRolloutReconcile -benchmem
	NODEPOOL_ASSETS="$$(hack/tools/build-control-plane.sh --print-dir)" \
	NODEPOOL_BENCH_FLEETROLLOUT_POOLS="$(NODEPOOL_BENCH_FLEETROLLOUT_POOLS)" NODEPOOL_BENCH_POOL_MACHINES="$(NODEPOOL_BENCH_POOL_MACHINES)" \
	go test ./test/bench -run '^$$' -bench BenchmarkWavedPlatformRollout -benchtime 1x -timeout 600m

# The dev environment keeps its state here; `make dev` again resumes it.
DEV_DATA_DIR ?= .dev
# Extra flags, e.g. make dev DEVFLAGS='--boot-delay 10s', make demo DEMOFLAGS=--yes.
DEVFLAGS ?=
DEMOFLAGS ?=

.PHONY: dev
dev: control-plane build ## Run nodepool dev up: a local control plane, Cluster API, nodepool and simulated machines (state in .dev/).
	$(BIN)/nodepool dev up --data-dir $(DEV_DATA_DIR) --assets-dir "$$(hack/tools/build-control-plane.sh --print-dir)" $(DEVFLAGS)

.PHONY: demo
demo: build ## Play the narrated demo against a running `make dev` (DEMOFLAGS=--yes runs it unattended).
	$(BIN)/nodepool dev demo --data-dir $(DEV_DATA_DIR) $(DEMOFLAGS)

.PHONY: lint
lint: ## go vet and gofmt.
	go vet ./...
	@out="$$(gofmt -l $$(git ls-files -co --exclude-standard '*.go'))"; \
	if [[ -n "$$out" ]]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

# Random interleavings of the scenario engine (internal/scenario): SEEDS
# seeds, each a simulated world of pools over days; a failing seed prints
# its trace and the command that replays it.
SEEDS ?= 1000
.PHONY: soak-sim
soak-sim: ## The scenario engine's random interleavings over SEEDS seeds (default 1000) on every core; a failing seed prints its trace and how to replay it.
	go test -c -o $(BIN)/scenario.test ./internal/scenario
	cd internal/scenario && time NODEPOOL_SIM_SEEDS=$(SEEDS) $(BIN)/scenario.test -test.run '^TestRandomInterleavings$$' -test.count=1 -test.timeout 180m
