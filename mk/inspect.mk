# kubectl inspect gpushare: build, install and test targets.

.PHONY: inspect
inspect: ## Build kubectl-inspect-gpushare into bin/ (put bin/ on PATH to use `kubectl inspect gpushare`).
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/kubectl-inspect-gpushare ./cmd/kubectl-inspect-gpushare

.PHONY: test-inspect
test-inspect: ## Tests of the inspect plugin, incl. the run through the real kubectl.
	$(GO) test -race -cover ./pkg/inspect/... ./cmd/kubectl-inspect-gpushare/...

.PHONY: update-inspect-golden
update-inspect-golden: ## Rewrite the golden files of pkg/inspect/testdata.
	$(GO) test ./pkg/inspect/ -run TestGoldenViews -update
