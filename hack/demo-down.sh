#!/usr/bin/env bash
# make demo-down: stops every process `make demo` started, by the PIDs recorded in .demo/pids.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DIR=${DEMO_DIR:-$ROOT/.demo}
# unmount_state undoes the tmpfs the share-plugin mounted on the counter folders of the pods
# still running when the node stopped (under its --hami-core-state-dir), deepest first.
unmount_state() {
	awk -v d="$DIR/hami-core-state" '$2 == d || index($2, d "/") == 1 {print $2}' /proc/self/mounts | sort -r |
		while read -r m; do umount -l "$m" 2>/dev/null || true; done
}
if [ -x "$DIR/bin/gpushare-local" ]; then
	"$DIR/bin/gpushare-local" down --dir "$DIR"
	unmount_state
	exit 0
fi
# fallback without the helper: SIGTERM in reverse start order
[ -f "$DIR/pids" ] || { echo "no demo running in $DIR"; exit 0; }
tac "$DIR/pids" | while read -r name pid; do
	if [ "$(readlink "/proc/$pid/cwd" 2>/dev/null)" = "$DIR" ]; then
		kill "$pid" && echo "stopped $name (pid $pid)"
		for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -9 "$pid" 2>/dev/null || true
	fi
done
rm -f "$DIR/pids"
unmount_state
