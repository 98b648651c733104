# make e2e            run a lane end to end (LANE=sim by default: no Docker, no KVM); builds
#                     the local control plane first for a sim lane
# make test           builds the local control plane while lanes-check, workflows-check, gofmt,
#                     go vet, staticcheck and go mod tidy run (make checks), downloads the pinned
#                     modules test/citations reads (make citation-modules), then every Go test
# make unit           the quick loop: the Go tests (-short) of every package but those that start a
#                     real Node, containerd or QEMU or run a whole sim lane (no tools build)
# make lint           staticcheck (pinned) over every package
# make tools          build the local control plane (etcd, kube-apiserver, ...) and the upstream
#                     controllers (CAPK, the Talos bootstrap provider, helm-controller,
#                     cdi-controller) from source
# make node-tools     build the sim's real Node's kubelet and pause (hack/tools/build-node.sh)
# make node-images    build the real Node's KubeVirt and CDI images: virt-launcher, virt-handler,
#                     virt-api, cdi-importer (hack/tools/build-images.sh; root and mmdebstrap)
# make lanes-check    validate every lane and its budget (LANES_DIR=<dir> for another folder)
# make workflows      regenerate .github/workflows/e2e.yaml and e2e-lane.yaml from the lanes
# make e2e-plan       print a lane's whole plan without a cluster
# make repro          rerun a downloaded CI run's lane with its pins (ARTIFACTS=<dir>)
# make scale-bench    the sim lane at 1 to 64 workers and 1 to 16 pools: wall, CPU, memory, the
#                     harness's CPU and API requests per worker, join stages (SCALE=1,8 for a subset)
# make e2e-down       tear down what a kept kind run left (LANE=<lane>, WORK=<the folder it printed>)
# make architecture-doc  write docs/architecture.md's package table from the packages' doc comments
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

.PHONY: checks citation-modules examples all scale-bench e2e e2e-down e2e-plan repro perf-doc architecture-doc test unit lanes-check workflows workflows-check tools node-tools tools-then-node-tools node-images vet fmt-check lint tidy-check clean

all: test

tools:
	@hack/tools/build.sh

# The sim's real Node's own binaries (the kubelet, pause), in a folder of their own so neither
# build invalidates the other.
node-tools:
	@hack/tools/build-node.sh

# The real Node's KubeVirt and CDI images (Debian trixie roots with the binaries built from the
# pinned modules), in a folder of their own keyed by their pins.
node-images:
	@hack/tools/build-images.sh

# The tools, then the node's kubelet from the Kubernetes packages kube-apiserver's build left in
# the build cache: side by side the two compiled the same packages twice (main's make test).
tools-then-node-tools:
	@$(MAKE) --no-print-directory tools
	@$(MAKE) --no-print-directory node-tools

$(BIN)/e2e: FORCE
	@$(GO) build -o $@ ./cmd/e2e

$(BIN)/lanes: FORCE
	@$(GO) build -o $@ ./cmd/lanes

FORCE:

# A sim lane runs on the local control plane: build it first (seconds when it is built), once
# the flags and knobs are known to be good (a bad one is refused in under a second). Whether it
# is a sim lane is the loaded lane's to say (its extends chain merged): e2e substrate.
TOOLS_BUILD ?= hack/tools/build.sh

e2e: $(BIN)/e2e
	@$(BIN)/e2e run --check --lane $(LANE) --lanes-dir $(LANES_DIR)
	@substrate=$$($(BIN)/e2e substrate --lane $(LANE) --lanes-dir $(LANES_DIR)) || exit 2; \
	 if [[ $$substrate == sim ]]; then $(TOOLS_BUILD); fi
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

architecture-doc:
	@$(GO) test ./test/docs -run TestArchitecturePackageTable -update

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
# tools' progress until the whole build ends. The node's kubelet builds after the tools, from the
# Kubernetes packages kube-apiserver's build left in the build cache: built at the same time, the
# two compiled the same packages twice (1064 s and 1081 s cold side by side; the kubelet alone
# after kube-apiserver 222 s). Then the tests, test/simlane first: go test starts packages in the
# order named, and the sim lane's runs are the longest (the other packages' tests run beside them).
test:
	@$(MAKE) --no-print-directory -j2 tools-then-node-tools node-images checks
	@$(MAKE) --no-print-directory citation-modules
	$(GO) test -count=1 -timeout 60m ./test/simlane ./...

# The quick loop: every package's tests, -short, but for the packages whose tests start the
# real Node, containerd or QEMU (internal/sim/node, internal/sim/guestos's boot, the real Node
# lane of internal/substrate/simulated), run a whole sim lane through bin/e2e (test/simlane,
# test/outside) or run the real upstream controllers for minutes (internal/sim/realupstream,
# internal/sim/guest, internal/install: 3 to 7 minutes each on 2 busy cores). The tests that need
# the tools skip without them (outside CI), as in make test.
UNIT_EXCLUDED := test/simlane test/outside internal/sim/node internal/sim/guestos internal/substrate/simulated \
	internal/sim/realupstream internal/sim/guest internal/install

unit:
	$(GO) test -count=1 -short $$($(GO) list ./... | grep -v -x -F $(foreach p,$(UNIT_EXCLUDED),-e github.com/cozystack/cozy-e2e/$(p)))

# The pinned modules whose files test/citations reads, each at the version its tools module (or
# the harness's go.mod, or build.sh) pins: a warm tools folder builds nothing, so the module
# cache may not hold them. Downloads only; seconds when they are there.
citation-modules:
	@cd hack/tools/controlplane && $(GO) mod download k8s.io/kubernetes k8s.io/api k8s.io/apimachinery k8s.io/apiserver k8s.io/cloud-provider k8s.io/component-helpers k8s.io/kubelet
	@cd hack/tools/virt-controller && $(GO) mod download kubevirt.io/kubevirt kubevirt.io/api kubevirt.io/client-go
	@cd hack/tools/cdi-controller && GONOSUMDB=kubevirt.io/containerized-data-importer $(GO) mod download kubevirt.io/containerized-data-importer
	@cd hack/tools/capk && $(GO) mod download sigs.k8s.io/cluster-api-provider-kubevirt
	@cd hack/tools/cabpt && $(GO) mod download github.com/siderolabs/cluster-api-bootstrap-provider-talos sigs.k8s.io/cluster-api github.com/siderolabs/talos/pkg/machinery
	@cd hack/tools/helm-controller && $(GO) mod download github.com/fluxcd/helm-controller github.com/fluxcd/helm-controller/api github.com/fluxcd/pkg/runtime helm.sh/helm/v4
	@cd hack/tools/kwok && $(GO) mod download sigs.k8s.io/kwok
	@$(GO) mod download sigs.k8s.io/cluster-api sigs.k8s.io/cluster-api/test sigs.k8s.io/kind kubevirt.io/api
	@$(GO) mod download github.com/cozystack/cozystack@v$$(sed -n 's/^COZYSTACK_VERSION=\([0-9.]*\)$$/\1/p' hack/tools/build.sh)
# Read for their citations only (test/citations shortNames CAPI, METALLB, TALOS): Cluster API
# at the tag docs/upstream.md read, MetalLB at the version Cozystack v1.6.1's chart ships, Talos
# at the release docs/signals.md reads, with its machinery (a module of its own inside Talos'
# tree, which internal/sim/guestos cites).
	@$(GO) mod download sigs.k8s.io/cluster-api@v1.13.5 go.universe.tf/metallb@v0.16.1 github.com/siderolabs/talos@v1.13.6 github.com/siderolabs/talos/pkg/machinery@v1.13.6

clean:
	rm -rf $(BIN)
