# The Helm chart (charts/gpushare): helm is built from the module proxy into bin/tools/ (pinned
# in hack/tools/helm/go.mod), like the linters; `make verify` lints and renders both modes.
HELM_TOOLS_MOD := hack/tools/helm
HELM           := $(TOOLS_BIN)/helm
CHART          := charts/gpushare

$(HELM): $(HELM_TOOLS_MOD)/go.mod
	cd $(HELM_TOOLS_MOD) && $(GO) build -ldflags "-s -w" -o $@ helm.sh/helm/v3/cmd/helm

.PHONY: helm
helm: $(HELM) ## Build the pinned helm into bin/tools/.

.PHONY: verify-helm
verify-helm: $(HELM) ## helm lint --strict and helm template of charts/gpushare in both modes.
	@for mode in kube-scheduler second-scheduler; do \
	  echo "helm lint/template $(CHART) mode=$$mode"; \
	  $(HELM) lint --strict $(CHART) --set mode=$$mode >/dev/null || exit 1; \
	  $(HELM) template gpushare $(CHART) -n kube-system --set mode=$$mode >/dev/null || exit 1; \
	done
verify: verify-helm
