# Fuzzing (go test -fuzz). Included by the Makefile. Every `func FuzzXxx` in a _test.go file under
# pkg/ is a target; `make unit` already replays their seeds and testdata/fuzz/FuzzXxx/ corpora.
FUZZTIME  ?= 30s
# FUZZ selects targets by name (an extended regexp), e.g. make fuzz FUZZ=FuzzHandler.
FUZZ      ?= .
# FUZZFLAGS go to every go test -fuzz run, e.g. FUZZFLAGS='-parallel 1 -fuzzminimizetime 5s' on a
# busy machine (go test otherwise minimizes each new input for up to a minute).
FUZZFLAGS ?=

.PHONY: fuzz
fuzz: ## Run every fuzz target for FUZZTIME (default 30s) each, one after another; FUZZ=regexp selects.
	@set -e; grep -rHo --include='*_test.go' '^func Fuzz[A-Za-z0-9_]*' pkg | sort | \
	while IFS=: read -r file fn; do \
		target=$${fn#func }; pkg=./$$(dirname "$$file"); \
		echo "$$target" | grep -Eq -- '$(FUZZ)' || continue; \
		echo "== $$target in $$pkg for $(FUZZTIME)"; \
		$(GO) test -run '^$$' -fuzz "^$$target\$$" -fuzztime $(FUZZTIME) $(FUZZFLAGS) "$$pkg"; \
	done
