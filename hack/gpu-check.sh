#!/usr/bin/env bash
# make gpu-check: proves on this machine's NVIDIA GPU, without Kubernetes, that the
# share-plugin's Allocate holds containers to their ask through HAMi-core (hack/gpucheck: real
# NVML, fake API server and kubelet, each container a mount namespace with Allocate's mounts and
# env). It also measures what users budget for: each card's total, driver reserve, usable memory
# and free memory at idle, the CUDA context's cost per process with and without HAMi-core, and
# the largest allocation under a limit of 1 GiB, 4 GiB and the whole card (a second table, for
# docs/isolation.md). Needs root, an NVIDIA GPU with its driver, and python3 with PyTorch or nvcc.
# On a machine with several GPUs it also checks the cards' topology as the share-plugin reads it
# (a link for every pair, the same as nvidia-smi topo -m, NUMA nodes) and prints the link
# matrix; on one GPU it prints a SKIP line for it, never counted as a pass. gpucheck
# -topology-only runs that part alone (no HAMi-core, no workload; exit 77 on one GPU).
#
# Exit status: 0 every check passed; 1 a check failed or the run broke; 77 skipped (no GPU, not
# root, no mount namespaces, neither PyTorch nor nvcc): a skip is never a pass.
#
# Environment (all optional):
#   GPUCHECK_BIN    folder holding a prebuilt gpucheck or gpucheck.gz, for a GPU machine without
#                   Go. Build it where Go is: `make gpucheck-bin [HAMI_CORE_SRC=<HAMi-core clone>]`
#                   leaves bin/gpucheck-carry/gpucheck.gz (cgo, glibc >= 2.34) and, with
#                   HAMI_CORE_SRC, a bare clone hami-core.git and the pinned commit's tree
#                   hami-core-src/ (for a machine without git; about 26 MB in all); copy that
#                   folder to the same place. Without GPUCHECK_BIN the script builds gpucheck
#                   with Go, or takes bin/gpucheck-carry/ when there is no Go.
#   HAMI_CORE_LIB   a built libvgpu.so to use instead of building one with hack/hami-core.sh
#   HAMI_CORE_SRC   a HAMi-core git clone for hack/hami-core.sh (no network needed); default
#                   hami-core.git of GPUCHECK_BIN or bin/gpucheck-carry/ when present. hack/hami-core.sh reads the rest
#                   (HAMI_CORE_COMMIT, CUDA_HOME, HAMI_CORE_NVCC, ...; see its header).
#   GPUCHECK_FLAGS  extra gpucheck flags, e.g. "-workload=cuda -units-a=8 -keep -v=2"
# Usage: hack/gpu-check.sh [gpucheck flags]
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=$ROOT/bin/gpucheck
# What make gpucheck-bin leaves for a GPU machine without Go: gpucheck.gz and hami-core.git.
CARRY=$ROOT/bin/gpucheck-carry
GO=${GO:-go}

skip() {
	printf 'SKIP gpu-check: %s — this is not a pass\n' "$*"
	exit 77
}
die() {
	printf 'gpu-check: error: %s\n' "$*" >&2
	exit 1
}
log() { printf '[gpu-check] %s\n' "$*" >&2; }

# Cheap checks first, so that a machine without a GPU builds nothing; gpucheck -probe-only
# checks the rest (NVML, mount namespaces).
uid=$(id -u)
[ "$uid" -eq 0 ] || skip "not root (uid $uid): the check makes mount namespaces and bind mounts, as a container runtime does"
[ -e /dev/nvidia0 ] || skip "no NVIDIA GPU: /dev/nvidia0 does not exist"
if command -v nvidia-smi >/dev/null 2>&1 && ! nvidia-smi -L >/dev/null 2>&1; then
	skip "nvidia-smi -L failed: $(nvidia-smi -L 2>&1 | head -n 1)"
fi

# --- the gpucheck binary ------------------------------------------------------------------------
# unpack DIR: the gpucheck in DIR (plain, or gzip-compressed as make gpucheck-bin leaves it).
unpack() {
	if [ -x "$1/gpucheck" ]; then
		bin=$1/gpucheck
	elif [ -f "$1/gpucheck.gz" ]; then
		mkdir -p "$OUT"
		if ! gzip -dc "$1/gpucheck.gz" >"$OUT/gpucheck.tmp.$$"; then
			die "cannot unpack $1/gpucheck.gz"
		fi
		chmod 0755 "$OUT/gpucheck.tmp.$$"
		mv -f "$OUT/gpucheck.tmp.$$" "$OUT/gpucheck"
		bin=$OUT/gpucheck
	else
		die "$1 holds neither gpucheck nor gpucheck.gz (build them with make gpucheck-bin)"
	fi
	log "using the prebuilt gpucheck from $1"
}

bin=
if [ -n "${GPUCHECK_BIN:-}" ]; then
	unpack "$GPUCHECK_BIN"
elif command -v "$GO" >/dev/null 2>&1; then
	log "building hack/gpucheck"
	mkdir -p "$OUT"
	(cd "$ROOT" && CGO_ENABLED=1 GOFLAGS="-trimpath -buildvcs=false" "$GO" build -ldflags "-s -w" -o "$OUT/gpucheck" ./hack/gpucheck) ||
		die "building hack/gpucheck failed (it needs cgo: a C compiler)"
	bin=$OUT/gpucheck
elif [ -d "$CARRY" ]; then
	unpack "$CARRY"
else
	die "no Go to build hack/gpucheck and no prebuilt one: run make gpucheck-bin where Go is and copy $CARRY here (or set GPUCHECK_BIN)"
fi

set +e
"$bin" -probe-only
rc=$?
set -e
[ "$rc" -eq 0 ] || exit "$rc"

# --- HAMi-core's libvgpu.so ---------------------------------------------------------------------
# The pin, read from the script that builds it (single quotes: a sed pattern, not an expansion).
# shellcheck disable=SC2016
pinned=$(sed -n 's/^HAMI_CORE_COMMIT=\${HAMI_CORE_COMMIT:-\([0-9a-f]\{40\}\)}$/\1/p' "$ROOT/hack/hami-core.sh")
if [ -n "${HAMI_CORE_LIB:-}" ]; then
	[ -f "$HAMI_CORE_LIB" ] || die "HAMI_CORE_LIB=$HAMI_CORE_LIB is not a file"
	lib=$(realpath "$HAMI_CORE_LIB")
	commit=${HAMI_CORE_COMMIT:-"unknown (HAMI_CORE_LIB=$HAMI_CORE_LIB; hack/hami-core.sh pins $pinned)"}
else
	# A carried copy: the bare clone where git is, else the tree make gpucheck-bin exported at
	# the pinned commit (hack/hami-core.sh cannot check a plain tree's commit without git).
	for d in "${GPUCHECK_BIN:-$CARRY}" "$CARRY"; do
		[ -z "${HAMI_CORE_SRC:-}" ] || break
		if [ -d "$d/hami-core.git" ] && command -v git >/dev/null 2>&1; then
			export HAMI_CORE_SRC=$d/hami-core.git
		elif [ -f "$d/hami-core-src/COMMIT" ] && [ "$(cat "$d/hami-core-src/COMMIT")" = "${HAMI_CORE_COMMIT:-$pinned}" ]; then
			export HAMI_CORE_SRC=$d/hami-core-src HAMI_CORE_ALLOW_UNPINNED=1
		fi
	done
	log "building HAMi-core's libvgpu.so (hack/hami-core.sh${HAMI_CORE_SRC:+, source $HAMI_CORE_SRC})"
	lib=$("$ROOT/hack/hami-core.sh" "$OUT/libvgpu.so" | tail -n 1) || die "hack/hami-core.sh failed (above); or give a built library in HAMI_CORE_LIB"
	lib=$(realpath "$lib")
	commit=${HAMI_CORE_COMMIT:-$pinned}
fi

# GPUCHECK_FLAGS is split on spaces on purpose.
# shellcheck disable=SC2086
exec "$bin" -library "$lib" -hami-core-commit "$commit" ${GPUCHECK_FLAGS:-} "$@"
