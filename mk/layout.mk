# Package layout checks (hack/verify-layout.sh): pkg/placement stays pure, pkg/sim stays off the extender.
.PHONY: verify-layout
verify-layout: ## pkg/placement imports neither net/http nor client-go; pkg/cache and pkg/sim build without client-go; pkg/sim only cache and placement; pkg/scheduler/wire and pkg/placement never import each other; pkg/scheduler/server imports no package of this module; pkg/scheduler/preempt and pkg/scheduler/fence never import pkg/scheduler, nor fence preempt.
	hack/verify-layout.sh
verify: verify-layout
