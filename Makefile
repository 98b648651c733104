# make e2e            run a lane end to end (LANE=sim by default: no Docker, no KVM); builds
#                     the local control plane first for a sim lane
# make test           builds the local control plane while lanes-check, workflows-check, gofmt,
#                     go vet, staticcheck and go mod tidy run (make checks), then every Go test
# make lint           staticcheck (pinned) over every package
# make tools          build the local control plane (etcd, kube-apiserver, ...) and the upstream
#                     controllers (CAPK, the Talos bootstrap provider, helm-controller,
#                     cdi-controller) from source
# make node-tools     build the sim's real Node's kubelet and pause (hack/tools/build-node.sh)
# make lanes-check    validate every lane and its budget (LANES_DIR=<dir> for another folder)
# make workflows      regenerate .github/workflows/e2e.yaml and e2e-lane.yaml from the lanes
# make e2e-plan       print a lane's whole plan without a cluster
# make repro          rerun a downloaded CI run's lane with its pins (ARTIFACTS=<dir>)
# make scale-bench    the sim lane at 1 to 64 workers and 1 to 16 pools: wall, CPU, memory, the
#                     harness's CPU and API requests per worker, join stages (SCALE=1,8 for a subset)
# make e2e-down       tear down what a kept kind run left (LANE=<lane>, WORK=<the folder it printed>)
# make perf-doc       write docs/performance.md from the measured figures in docs/performance.yaml

SHELL       := /bin/bash
GO          ?= go
LANE        ?= sim
LANES_DIR   ?= lanes
ARTIFACTS   ?=
BIN         := bin

# The tools folder lives outside the work tree, keyed by versions, so clones share it.
E2E_TOOLS_DIR ?= $(shell hack/tools/build.sh --print)
export E2E_TOOLS_DIR

.PHONY: checks examples all scale-bench e2e e2e-down e2e-plan repro perf-doc test unit lanes-check workflows workflows-check tools node-tools vet fmt-check lint tidy-check clean

all: test

tools:
	@hack/tools/build.sh

# The sim's real Node's own binaries (the kubelet, pause), in a folder of their own so neither
# build invalidates the other.
node-tools:
	@hack/tools/build-node.sh

$(BIN)/e2e: FORCE
	@$(GO) build -o $@ ./cmd/e2e

$(BIN)/lanes: FORCE
	@$(GO) build -o $@ ./cmd/lanes

FORCE:

# A sim lane runs on the local control plane: build it first (seconds when it is built), once
# the flags and knobs are known to be good (a bad one is refused in under a second).
E2E_NEEDS := $(shell grep -qs '^substrate: *sim' $(LANES_DIR)/$(LANE).yaml && echo tools)

e2e: $(BIN)/e2e
	@$(BIN)/e2e run --check --lane $(LANE) --lanes-dir $(LANES_DIR)
	@$(if $(E2E_NEEDS),hack/tools/build.sh,true)
	@$(BIN)/e2e run --lane $(LANE) --lanes-dir $(LANES_DIR)

# A benchmark, not a test: one run at a time, each a whole sim lane (minutes each, CPU heavy).
scale-bench: tools
	@$(GO) run ./hack/scalebench -e2e $(BIN)/e2e $(if $(SCALE),-scale $(SCALE))

e2e-down: $(BIN)/e2e
	@$(BIN)/e2e down --lane $(LANE) --lanes-dir $(LANES_DIR) $(if $(WORK),--work $(WORK))

e2e-plan: $(BIN)/lanes
	@$(BIN)/lanes plan --lane $(LANE) --dir $(LANES_DIR)

repro: $(BIN)/e2e
	@test -n "$(ARTIFACTS)" || { echo "make repro: set ARTIFACTS=<folder of a downloaded run>" >&2; exit 2; }
	@$(BIN)/e2e repro --artifacts $(ARTIFACTS)

lanes-check: $(BIN)/lanes
	@$(BIN)/lanes check --dir $(LANES_DIR)

workflows: $(BIN)/lanes
	@$(BIN)/lanes workflow write --dir $(LANES_DIR)

workflows-check: $(BIN)/lanes
	@$(BIN)/lanes workflow check --dir $(LANES_DIR)

perf-doc:
	@$(GO) run ./hack/perfdoc

vet:
	@$(GO) vet ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [[ -n $$out ]]; then echo "gofmt would change: $$out" >&2; exit 1; fi

# staticcheck at an exact version, built by the Go toolchain into its cache (about 30 s cold).
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2

lint:
	@$(GO) run $(STATICCHECK) ./...

# go.mod and go.sum say exactly what the code imports.
tidy-check:
	@$(GO) mod tidy -diff >/dev/null || { echo "go mod tidy would change go.mod or go.sum: run it and commit the result" >&2; $(GO) mod tidy -diff >&2; exit 1; }

# The example suites are Go modules of their own (a replace to this checkout): each builds,
# vets, is tidy, and its unit tests pass; test/simlane runs them on their lanes.
EXAMPLES := $(patsubst %/go.mod,%,$(wildcard examples/*/go.mod))

examples:
	@for d in $(EXAMPLES); do \
		(cd $$d && $(GO) vet ./... && $(GO) run $(STATICCHECK) ./... && $(GO) test -count=1 ./... && \
		 { $(GO) mod tidy -diff >/dev/null || { echo "$$d: go mod tidy would change go.mod or go.sum: run it there and commit the result" >&2; exit 1; }; }) || exit 1; \
	done

# The checks that need no tools.
checks: lanes-check workflows-check fmt-check vet tidy-check lint examples

# The tools build beside the checks: a cold tools build waits on module downloads and links one
# binary at a time, and the checks' compiles take the core it leaves idle (docs/performance.md,
# "CI run, cold"). Their lines interleave as they come: grouping them (make -O) would hold the
# tools' progress until the whole build ends. Then the tests, test/simlane first: go test starts
# packages in the order named, and the sim lane's runs are the longest (the other packages' tests
# run beside them).
test:
	@$(MAKE) --no-print-directory -j2 tools node-tools checks
	$(GO) test -count=1 -timeout 50m ./test/simlane ./...

clean:
	rm -rf $(BIN)
