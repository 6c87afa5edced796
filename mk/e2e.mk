# Real-cluster end-to-end tests and the local demo (test/e2e, hack/e2e-bins.sh, hack/demo.sh).
E2E_TIMEOUT ?= 60m
E2E_RUN     ?= .
E2E_FLAGS   ?= -v

TEST_EXTRA += e2e

.PHONY: e2e-bins
e2e-bins: ## Build pinned kube-apiserver/-scheduler/-controller-manager, kubelet, kubectl, etcd, kwok, containerd v2 into bin/e2e/.
	hack/e2e-bins.sh

.PHONY: e2e
e2e: e2e-bins ## Real-cluster e2e: etcd + kube-apiserver + kube-scheduler + our extender + kwok GPU nodes.
	cd test/e2e && GOFLAGS=-trimpath $(GO) test -count=1 -p 1 -timeout $(E2E_TIMEOUT) $(E2E_FLAGS) -run '$(E2E_RUN)' ./...

.PHONY: demo
demo: ## Start a local GPU-sharing cluster with the samples of config/samples/ (keeps running).
	hack/demo.sh

.PHONY: demo-down
demo-down: ## Stop everything `make demo` started.
	hack/demo-down.sh

.PHONY: verify-e2e
verify-e2e: ## go vet and go mod tidy -diff in the e2e module.
	cd test/e2e && GOFLAGS=-trimpath $(GO) vet ./...
	cd test/e2e && GOFLAGS=-trimpath $(GO) mod tidy -diff
verify: verify-e2e

.PHONY: lint-e2e
lint-e2e: $(GOLANGCI_LINT) ## golangci-lint over the e2e module (with the root .golangci.yml).
	cd test/e2e && GOFLAGS=-trimpath $(GOLANGCI_LINT) run ./...
lint: lint-e2e

# bench-replay: the placement users get, through the real kube-scheduler (docs/placement.md).
TRACE     ?= default
POLICY    ?= fgd-online
SEED      ?= 42
TRACE_DIR ?= ../shared/traces/openb-2023
# SCHEDULER_CONFIG: empty for the shipped config/scheduler-config.yaml (with DRA=1: kube-scheduler's defaults).
SCHEDULER_CONFIG ?=
# DRA=1: replay under DRA, kube-scheduler alone placing claims on the nodes' ResourceSlices (docs/benchmarks.md).
DRA ?=

.PHONY: bench-replay
bench-replay: e2e-bins ## Replay an openb trace through real kube-scheduler + extender (DRA=1: kube-scheduler alone under DRA): TRACE_DIR= TRACE= POLICY= SEED= SCHEDULER_CONFIG= DRA= (table, then one JSON line).
	cd test/e2e && GOFLAGS=-trimpath $(GO) run ./cmd/bench-replay --trace-dir "$(abspath $(TRACE_DIR))" --trace "$(TRACE)" --policy "$(POLICY)" --seed "$(SEED)" \
		$(if $(SCHEDULER_CONFIG),--scheduler-config "$(abspath $(SCHEDULER_CONFIG))") $(if $(DRA),--dra) $(REPLAY_FLAGS)

# bench-e2e: scheduling throughput, kube-scheduler alone against kube-scheduler + the extender.
NODES ?= 1000
PODS  ?= 5000
RUNS  ?= 3

.PHONY: bench-e2e
bench-e2e: e2e-bins ## Throughput on a real control plane, kube-scheduler alone vs + extender: NODES= PODS= RUNS= (table, then one JSON line).
	cd test/e2e && GOFLAGS=-trimpath $(GO) run ./cmd/bench-e2e --nodes "$(NODES)" --pods "$(PODS)" --runs "$(RUNS)" $(BENCH_FLAGS)

# bench-scale: the extender at a large cluster's size (5,000 nodes, 50,000 running pods).
SCALE_NODES ?= 5000
SCALE_PODS  ?= 50000

.PHONY: bench-scale
bench-scale: e2e-bins ## Extender at scale on a real control plane: SCALE_NODES= SCALE_PODS= (ready time, RSS, filter p50/p99 over HTTPS; table, then one JSON line).
	cd test/e2e && GOFLAGS=-trimpath $(GO) run ./cmd/bench-scale --nodes "$(SCALE_NODES)" --pods "$(SCALE_PODS)" $(SCALE_FLAGS)
