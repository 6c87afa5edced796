# gpu-check: HAMi-core's memory limits proven on a real NVIDIA GPU (hack/gpu-check.sh,
# hack/gpucheck). Included by the Makefile.

.PHONY: gpu-check
gpu-check: ## On an NVIDIA GPU machine, as root: Allocate + HAMi-core limits checked in mount namespaces (table; exit 77 = skipped, not a pass).
	hack/gpu-check.sh

.PHONY: gpucheck-bin
gpucheck-bin: ## For a GPU machine without Go: bin/gpucheck-carry/gpucheck.gz (cgo) and, with HAMI_CORE_SRC=<clone>, a bare clone of HAMi-core.
	mkdir -p $(BIN)/gpucheck-carry
	CGO_ENABLED=1 $(GO) build -ldflags "-s -w" -o $(BIN)/gpucheck-carry/gpucheck ./hack/gpucheck
	gzip -f $(BIN)/gpucheck-carry/gpucheck
	@if [ -n "$(HAMI_CORE_SRC)" ]; then \
		set -e; carry=$(BIN)/gpucheck-carry; \
		commit=$$(sed -n 's/^HAMI_CORE_COMMIT=\$${HAMI_CORE_COMMIT:-\([0-9a-f]\{40\}\)}$$/\1/p' hack/hami-core.sh); \
		rm -rf $$carry/hami-core.git $$carry/hami-core-src; \
		git clone --quiet --bare "$(HAMI_CORE_SRC)" $$carry/hami-core.git; \
		mkdir $$carry/hami-core-src; git -C $$carry/hami-core.git archive $$commit | tar -x -C $$carry/hami-core-src; \
		echo $$commit > $$carry/hami-core-src/COMMIT; \
		echo "HAMi-core $$commit in $$carry/hami-core.git and $$carry/hami-core-src"; \
	fi

.PHONY: gpucheck-test
gpucheck-test: ## Self-test of hack/gpucheck without a GPU (the mount-namespace launcher runs as root only).
	$(GO) test -race ./hack/gpucheck/...
