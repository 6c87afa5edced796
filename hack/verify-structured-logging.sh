#!/usr/bin/env bash
# make verify-logging: the structured-logging check that kubernetes-sigs/scheduler-plugins runs
# in its hack/verify-structured-logging.sh, with sigs.k8s.io/logtools' logcheck (pinned in
# hack/tools/lint/go.mod, built into bin/tools/ by make). Every package of the main module and
# of the e2e module, tests included, must pass
#   structured   no printf-style klog calls (klog.Infof, klog.Errorf, ...)
#   contextual   no klog logging functions at all: log through klog.FromContext(ctx) or a
#                klog.Logger handed down (klog.Background, klog.NewContext etc. stay allowed)
# plus logcheck's default checks: a value for every key, constant keys in lowerCamelCase, no V(0),
# no V(n).Error, no deprecated klog helpers, no nil-panicking Stringers.
# scheduler-plugins also runs it with GOOS=windows; that is left out here because nothing is
# built for Windows (the binaries need unix sockets and NVML) and no file is Windows-only.
# Usage: hack/verify-structured-logging.sh   (LOGCHECK=path overrides bin/tools/logcheck)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
LOGCHECK=${LOGCHECK:-$ROOT/bin/tools/logcheck}
if [ ! -x "$LOGCHECK" ]; then
	echo "no logcheck at $LOGCHECK: run make tools" >&2
	exit 1
fi

ret=0
for mod in . test/e2e; do
	echo "logcheck (structured, contextual): $mod/..."
	(cd "$ROOT/$mod" && GOOS=linux "$LOGCHECK" -check-structured -check-contextual ./...) || ret=1
done
if [ "$ret" -eq 0 ]; then
	echo "structured logging check passed"
fi
exit "$ret"
