# gpushare. `make help` lists the targets.
GO        ?= go
BIN       ?= bin
# One set of build flags everywhere (developers, CI, the e2e module): a different set changes
# every action ID and makes the next build recompile Kubernetes.
override GOFLAGS := -trimpath -buildvcs=false
export GOFLAGS
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT    ?= $(shell git rev-parse HEAD 2>/dev/null)
LDFLAGS   := -X github.com/gpushare/gpushare/pkg/version.Version=$(VERSION) -X github.com/gpushare/gpushare/pkg/version.Commit=$(COMMIT)
CMDS      := $(notdir $(wildcard cmd/*))
# Linters, pinned in their own module (hack/tools/lint/go.mod) and built from the module proxy
# into bin/tools/ the first time they are needed, or again when go.mod changes their pins.
TOOLS_BIN      := $(abspath $(BIN))/tools
LINT_TOOLS_MOD := hack/tools/lint
GOLANGCI_LINT  := $(TOOLS_BIN)/golangci-lint
LOGCHECK       := $(TOOLS_BIN)/logcheck
# Lists the Go files of the checkout, committed or new (not ignored), without deleted ones.
GO_FILES       := git ls-files --cached --others --exclude-standard -- '*.go' | while read -r f; do [ ! -e "$$f" ] || echo "$$f"; done
# Suites that `make test` runs after the unit tests: the fast ones (TEST_FAST) with verify and
# the unit tests, the slow ones (TEST_EXTRA: the e2e suite) only once those passed; mk/*.mk
# files append to them.
TEST_FAST  :=
TEST_EXTRA :=

.DEFAULT_GOAL := help

-include mk/*.mk

.PHONY: help
help: ## List the targets.
	@grep -hE '^[a-zA-Z0-9_%-]+:.*## ' $(MAKEFILE_LIST) | sort | awk 'BEGIN{FS=":.*## "}{printf "  %-18s %s\n", $$1, $$2}'

.PHONY: build
build: $(addprefix cmd-,$(CMDS)) ## Build every binary into bin/.

cmd-%: ## Build one binary, e.g. make cmd-extender.
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/$* ./cmd/$*

.PHONY: test
test: ## The test command: the fast tier (verify, unit tests with -race, TEST_FAST), then TEST_EXTRA (e2e); stops at the first failure.
	$(MAKE) --no-print-directory verify unit $(TEST_FAST)
	$(MAKE) --no-print-directory $(TEST_EXTRA)

.PHONY: unit
unit: ## Unit tests with the race detector and coverage.
	$(GO) test -race -cover ./...

.PHONY: bench
bench: ## Benchmarks of the extender (filter, prioritize, bind) at 100/1k/5k nodes.
	$(GO) test -run '^$$' -bench . -benchmem ./pkg/...

.PHONY: fmt
fmt: ## gofmt the tree.
	gofmt -w $$($(GO_FILES))

.PHONY: verify
verify: verify-gofmt verify-vet verify-tidy lint verify-logging ## gofmt, go vet, go mod tidy -diff, golangci-lint and logcheck: nothing may be left to change or report.

.PHONY: verify-gofmt
verify-gofmt: ## gofmt -l must list nothing.
	@out=$$(gofmt -l $$($(GO_FILES))); if [ -n "$$out" ]; then echo "gofmt: $$out"; exit 1; fi

.PHONY: verify-vet
verify-vet: ## go vet the main module.
	$(GO) vet ./...

# `go mod tidy -diff` prints the change tidy would make and exits non-zero, touching no file.
.PHONY: verify-tidy
verify-tidy: ## go.mod/go.sum of the main module and the tool modules must be tidy.
	$(GO) mod tidy -diff
	cd $(LINT_TOOLS_MOD) && $(GO) mod tidy -diff
	cd hack/tools/etcd && $(GO) mod tidy -diff
	cd hack/tools/containerd && $(GO) mod tidy -diff

$(GOLANGCI_LINT): $(LINT_TOOLS_MOD)/go.mod
	cd $(LINT_TOOLS_MOD) && v=$$($(GO) list -m -f '{{.Version}}' github.com/golangci/golangci-lint/v2) && \
	 $(GO) build -ldflags "-s -w -X main.version=$${v#v} -X main.date=pinned" -o $@ github.com/golangci/golangci-lint/v2/cmd/golangci-lint

$(LOGCHECK): $(LINT_TOOLS_MOD)/go.mod
	cd $(LINT_TOOLS_MOD) && $(GO) build -ldflags "-s -w" -o $@ sigs.k8s.io/logtools/logcheck

.PHONY: tools
tools: $(GOLANGCI_LINT) $(LOGCHECK) ## Build the pinned linters into bin/tools/ (skipped when present).

.PHONY: lint
lint: $(GOLANGCI_LINT) ## golangci-lint (.golangci.yml) over the main module; mk/e2e.mk adds the e2e module.
	$(GOLANGCI_LINT) run ./...

.PHONY: verify-logging
verify-logging: $(LOGCHECK) ## logcheck: structured and contextual klog calls only (hack/verify-structured-logging.sh).
	LOGCHECK=$(LOGCHECK) hack/verify-structured-logging.sh
