# Device plugin targets (share-plugin). Included by the Makefile.

.PHONY: plugin-test
plugin-test: ## Unit tests of the device plugin (race).
	$(GO) test -race ./pkg/deviceplugin/... ./cmd/share-plugin/...

.PHONY: plugin-bench
plugin-bench: ## Allocate latency (p50/p99) with 100 pods bound to the node.
	$(GO) test -run '^$$' -bench BenchmarkAllocate -benchtime 3000x ./pkg/deviceplugin/

.PHONY: plugin-fake
plugin-fake: ## Build share-plugin serving go-nvml's mock GPUs (fakenvml tag) into bin/share-plugin-fake.
	$(GO) build -tags fakenvml -ldflags "$(LDFLAGS)" -o $(BIN)/share-plugin-fake ./cmd/share-plugin
