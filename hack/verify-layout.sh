#!/usr/bin/env bash
# Checks the package layout that docs/design.md promises:
#  - pkg/placement (and its sub-packages) is pure placement: no net/http, no client-go;
#  - pkg/sim places pods through pkg/cache and pkg/placement only, never through the extender;
#  - pkg/cache is state only and pkg/sim runs offline: neither depends on client-go (the API feed
#    lives in pkg/cache/feed);
#  - the extender's wire codec (pkg/scheduler/wire) and placement are fenced both ways: neither
#    depends on the other (the codec writes gpumem.FitError, which placement.FitError is);
#  - serving and HA (pkg/scheduler/server) know nothing of the extender: they depend on no
#    package of this module (pkg/scheduler wraps its verbs with them, never the other way);
#  - preemption (pkg/scheduler/preempt) and the leader's fenced writes (pkg/scheduler/fence)
#    never depend on the extender (pkg/scheduler), which holds and calls them; the fence does not
#    depend on preemption either.
set -euo pipefail
cd "$(dirname "$0")/.."
fail=0
for pkg in ./pkg/placement ./pkg/placement/fgd ./pkg/placement/policies ./pkg/placement/testing; do
	if bad=$(go list -deps "$pkg" | grep -E '^(net/http|k8s\.io/client-go(/.*)?)$'); then
		echo "verify-layout: $pkg depends on: $(echo "$bad" | tr '\n' ' ')"
		fail=1
	fi
done
for pkg in ./pkg/cache ./pkg/sim; do
	if bad=$(go list -deps "$pkg" | grep -E '^k8s\.io/client-go(/.*)?$'); then
		echo "verify-layout: $pkg depends on client-go: $(echo "$bad" | head -3 | tr '\n' ' ')..."
		fail=1
	fi
done
if bad=$(go list -f '{{join .Imports "\n"}}' ./pkg/sim | grep '^github.com/gpushare/gpushare/' |
	grep -vE '/pkg/(cache|placement|placement/policies|contract|gpumem)$'); then
	echo "verify-layout: pkg/sim imports $(echo "$bad" | tr '\n' ' ')(only cache, placement, contract, gpumem)"
	fail=1
fi
for pair in ./pkg/scheduler/wire:pkg/placement ./pkg/placement:pkg/scheduler/wire; do
	pkg=${pair%%:*} fenced=github.com/gpushare/gpushare/${pair#*:}
	if bad=$(go list -deps "$pkg" | grep -E "^${fenced}(/.*)?$"); then
		echo "verify-layout: $pkg depends on $(echo "$bad" | tr '\n' ' ')(the wire codec and placement are fenced both ways)"
		fail=1
	fi
done
if bad=$(go list -deps ./pkg/scheduler/server | grep '^github.com/gpushare/gpushare/' | grep -vx 'github.com/gpushare/gpushare/pkg/scheduler/server'); then
	echo "verify-layout: pkg/scheduler/server depends on $(echo "$bad" | tr '\n' ' ')(serving and HA know nothing of the extender)"
	fail=1
fi
for pair in ./pkg/scheduler/preempt:pkg/scheduler ./pkg/scheduler/fence:pkg/scheduler ./pkg/scheduler/fence:pkg/scheduler/preempt; do
	pkg=${pair%%:*} fenced=github.com/gpushare/gpushare/${pair#*:}
	if go list -deps "$pkg" | grep -qx "$fenced"; then
		echo "verify-layout: $pkg depends on $fenced (the extender holds preemption and the fence, never the other way)"
		fail=1
	fi
done
exit $fail
