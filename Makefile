# gpushare. `make help` lists the targets.
GO        ?= go
BIN       ?= bin
# One set of build flags everywhere (developers, CI, the e2e module): a different set changes
# every action ID and makes the next build recompile Kubernetes.
override GOFLAGS := -trimpath -buildvcs=false
export GOFLAGS
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -X github.com/gpushare/gpushare/pkg/version.Version=$(VERSION)
CMDS      := $(notdir $(wildcard cmd/*))
# Targets that `make test` runs after the unit tests; mk/*.mk files append to it.
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
test: verify unit $(TEST_EXTRA) ## The test command: verify, unit tests (race), then every suite in TEST_EXTRA (e2e).

.PHONY: unit
unit: ## Unit tests with the race detector and coverage.
	$(GO) test -race -cover ./...

.PHONY: bench
bench: ## Benchmarks of the extender (filter, prioritize, bind) at 100/1k/5k nodes.
	$(GO) test -run '^$$' -bench . -benchmem ./pkg/...

.PHONY: fmt
fmt: ## gofmt the tree.
	gofmt -w $$(git ls-files '*.go')

.PHONY: verify
verify: ## gofmt, go vet and go mod tidy must leave nothing to change.
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt: $$out"; exit 1; fi
	$(GO) vet ./...
	@cp go.mod /tmp/gpushare.go.mod.bak; cp go.sum /tmp/gpushare.go.sum.bak; $(GO) mod tidy; \
	 if ! git diff --quiet -- go.mod go.sum; then echo "go mod tidy changed go.mod/go.sum"; git diff -- go.mod go.sum; \
	 cp /tmp/gpushare.go.mod.bak go.mod; cp /tmp/gpushare.go.sum.bak go.sum; exit 1; fi
