#!/usr/bin/env bash
# Builds HAMi-core's libvgpu.so (Apache-2.0, github.com/Project-HAMi/HAMi-core) at one pinned
# commit and copies it to $1 (default bin/hami-core/libvgpu.so). The share-plugin image ships
# the result (build/share-plugin.Dockerfile runs this script); docs/hami-core.md has the facts.
#
# The pin: HAMI_CORE_COMMIT below is the one place the version is written for builds (the
# Dockerfile's HAMI_CORE_COMMIT build argument is empty unless given, and then this default
# applies). To upgrade, change it here and follow docs/hami-core.md#upgrading.
#
# Environment (all optional):
#   HAMI_CORE_COMMIT        full 40-hex commit to build (default: the pin below)
#   HAMI_CORE_SRC           a local git repository (work tree or bare) holding that commit: no
#                           network needed. Without it the commit is fetched from HAMI_CORE_REPO.
#   HAMI_CORE_REPO          default https://github.com/Project-HAMi/HAMi-core
#   HAMI_CORE_ALLOW_UNPINNED=1  accept a HAMI_CORE_SRC that is a plain source tree (no git): its
#                           commit cannot be checked
#   CUDA_HOME               CUDA toolkit root (default /usr/local/cuda, as HAMi-core's CMake)
#   HAMI_CORE_CUDA_INCLUDE  folder with cuda.h (CUDA >= 12.5) and nvml.h (default: the first of
#                           $CUDA_HOME/include and /usr/include that has cuda.h)
#   HAMI_CORE_CUDA_LIB      folder with libcuda.so and libnvidia-ml.so (stubs will do) to link
#                           against (default: $CUDA_HOME/lib64/stubs or $CUDA_HOME/lib64 when
#                           they have libcuda.so, else the compiler's own search path)
#   HAMI_CORE_NVCC          nvcc (default: nvcc on PATH, else $CUDA_HOME/bin/nvcc). HAMi-core's
#                           CMakeLists configures its tests with find_package(CUDA REQUIRED),
#                           which needs nvcc even though only libvgpu.so is built.
#   HAMI_CORE_MAX_GLIBC     fail when libvgpu.so needs a newer glibc than this (e.g. 2.28): it is
#                           preloaded into every process of the containers it limits, and a
#                           process whose glibc is older does not start at all
#   HAMI_CORE_CMAKE_OPTIONS extra cmake options (split on spaces)
#   HAMI_CORE_JOBS          parallel build jobs (default: nproc)
#   HAMI_CORE_KEEP=1        keep the temporary source and build folder
#   CMAKE                   cmake binary (default cmake)
# Usage: hack/hami-core.sh [OUTPUT]     prints OUTPUT's path on its last line
set -euo pipefail

HAMI_CORE_COMMIT=${HAMI_CORE_COMMIT:-8f3a89c67b037d8fdfe6c4cd4d8c4f0cd6504811}
HAMI_CORE_REPO=${HAMI_CORE_REPO:-https://github.com/Project-HAMi/HAMi-core}
HAMI_CORE_SRC=${HAMI_CORE_SRC:-}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
CMAKE=${CMAKE:-cmake}

ROOT=$(cd "$(dirname "$0")/.." && pwd)
log() { printf '[hami-core] %s\n' "$*" >&2; }
die() {
	printf '[hami-core] error: %s\n' "$*" >&2
	exit 1
}
need() { command -v "$1" >/dev/null 2>&1 || die "$1 not found on PATH: $2"; }

out=${1:-$ROOT/bin/hami-core/libvgpu.so}
case $out in /*) ;; *) out=$PWD/$out ;; esac

[[ $HAMI_CORE_COMMIT =~ ^[0-9a-f]{40}$ ]] ||
	die "HAMI_CORE_COMMIT=$HAMI_CORE_COMMIT is not a full 40-character lower-case commit hash (a branch, tag or short hash would not pin the build)"

need "$CMAKE" "install CMake (3.13 or newer)"
need make "install make"
need cc "install a C compiler (gcc)"
need tar "install tar"

work=$(mktemp -d "${TMPDIR:-/tmp}/hami-core.XXXXXX")
cleanup() {
	if [ "${HAMI_CORE_KEEP:-0}" = 1 ]; then
		log "kept $work"
	else
		rm -rf "$work"
	fi
}
trap cleanup EXIT

# --- source at the pinned commit --------------------------------------------------------------
export_commit() { # $1: git dir or work tree holding $HAMI_CORE_COMMIT
	git -C "$1" cat-file -e "$HAMI_CORE_COMMIT^{commit}" 2>/dev/null ||
		die "commit $HAMI_CORE_COMMIT is not in $1 (fetch it there, or unset HAMI_CORE_SRC to clone $HAMI_CORE_REPO)"
	mkdir -p "$work/src"
	git -C "$1" archive --format=tar "$HAMI_CORE_COMMIT" | tar -x -C "$work/src" ||
		die "could not export $HAMI_CORE_COMMIT from $1"
	src=$work/src
}

src=
if [ -n "$HAMI_CORE_SRC" ]; then
	[ -d "$HAMI_CORE_SRC" ] || die "HAMI_CORE_SRC=$HAMI_CORE_SRC is not a folder"
	if command -v git >/dev/null 2>&1 && git -C "$HAMI_CORE_SRC" rev-parse --git-dir >/dev/null 2>&1; then
		log "source: $HAMI_CORE_SRC at $HAMI_CORE_COMMIT"
		export_commit "$HAMI_CORE_SRC"
	elif [ "${HAMI_CORE_ALLOW_UNPINNED:-0}" = 1 ]; then
		log "warning: $HAMI_CORE_SRC is not a git repository; building it as it is, unchecked against $HAMI_CORE_COMMIT"
		src=$(cd "$HAMI_CORE_SRC" && pwd)
	else
		die "HAMI_CORE_SRC=$HAMI_CORE_SRC is not a git repository, so it cannot be checked to be $HAMI_CORE_COMMIT (set HAMI_CORE_ALLOW_UNPINNED=1 to build it anyway)"
	fi
else
	need git "install git, or point HAMI_CORE_SRC at a local clone of HAMi-core"
	log "source: fetching $HAMI_CORE_COMMIT from $HAMI_CORE_REPO"
	git init -q "$work/git"
	if ! git -C "$work/git" fetch -q --depth 1 "$HAMI_CORE_REPO" "$HAMI_CORE_COMMIT" 2>"$work/fetch.err"; then
		log "fetching the commit alone failed ($(tail -n 1 "$work/fetch.err")); fetching every branch"
		git -C "$work/git" fetch -q "$HAMI_CORE_REPO" '+refs/heads/*:refs/remotes/origin/*' ||
			die "cannot fetch $HAMI_CORE_REPO (no network? then clone it elsewhere and set HAMI_CORE_SRC to the clone)"
	fi
	export_commit "$work/git"
fi
if [ ! -f "$src/CMakeLists.txt" ] || [ ! -f "$src/src/libvgpu.c" ]; then
	die "$src does not look like HAMi-core (no CMakeLists.txt or src/libvgpu.c)"
fi

# --- CUDA headers, link libraries, nvcc --------------------------------------------------------
inc=${HAMI_CORE_CUDA_INCLUDE:-}
if [ -z "$inc" ]; then
	for d in "$CUDA_HOME/include" /usr/include; do
		if [ -f "$d/cuda.h" ]; then
			inc=$d
			break
		fi
	done
	[ -n "$inc" ] || die "cuda.h not found in $CUDA_HOME/include or /usr/include: install the CUDA toolkit headers (12.5 or newer) and set CUDA_HOME or HAMI_CORE_CUDA_INCLUDE"
fi
[ -f "$inc/cuda.h" ] || die "HAMI_CORE_CUDA_INCLUDE=$inc has no cuda.h"
[ -f "$inc/nvml.h" ] || [ -f /usr/include/nvml.h ] ||
	die "nvml.h not found in $inc or /usr/include: install the NVML headers (CUDA toolkit's cuda-nvml-dev, Debian's libnvidia-ml-dev)"
cuda_version=$(printf '#include <cuda.h>\nhami_core_cuda_version=CUDA_VERSION\n' |
	cc -E -P -I"$inc" -x c - 2>/dev/null | sed -n 's/^hami_core_cuda_version=//p') || true
[[ $cuda_version =~ ^[0-9]+$ ]] || die "cannot read CUDA_VERSION from $inc/cuda.h"
# HAMi-core at this commit hooks cuCtxCreate_v4 (CUctxCreateParams), first declared in CUDA
# 12.5's cuda.h; 12.4 and older headers fail to compile (docs/hami-core.md#building).
if [ "$cuda_version" -lt 12050 ]; then
	die "$inc/cuda.h is CUDA $((cuda_version / 1000)).$((cuda_version % 1000 / 10)); HAMi-core $HAMI_CORE_COMMIT needs CUDA 12.5 or newer headers (it uses cuCtxCreate_v4 and CUctxCreateParams)"
fi
log "cuda.h: $inc (CUDA $((cuda_version / 1000)).$((cuda_version % 1000 / 10)))"
# HAMi-core's CMakeLists adds ${CUDA_HOME}/include (from the environment) ahead of the system
# folders: a folder whose include/ is $inc makes those headers win.
mkdir -p "$work/cuda-home"
ln -s "$inc" "$work/cuda-home/include"

lib=${HAMI_CORE_CUDA_LIB:-}
if [ -z "$lib" ]; then
	for d in "$CUDA_HOME/lib64/stubs" "$CUDA_HOME/lib64"; do
		if [ -e "$d/libcuda.so" ]; then
			lib=$d
			break
		fi
	done
fi
linker_flags=
if [ -n "$lib" ]; then
	[ -e "$lib/libcuda.so" ] || die "HAMI_CORE_CUDA_LIB=$lib has no libcuda.so"
	linker_flags="-L$lib"
	log "link libraries: $lib"
else
	for l in libcuda.so libnvidia-ml.so; do
		[ "$(cc -print-file-name="$l")" != "$l" ] || [ -n "${LIBRARY_PATH:-}" ] ||
			die "$l not found for linking: set HAMI_CORE_CUDA_LIB to a folder with libcuda.so and libnvidia-ml.so (the toolkit's lib64/stubs)"
	done
fi

nvcc=${HAMI_CORE_NVCC:-}
if [ -z "$nvcc" ]; then
	if command -v nvcc >/dev/null 2>&1; then
		nvcc=$(command -v nvcc)
	elif [ -x "$CUDA_HOME/bin/nvcc" ]; then
		nvcc=$CUDA_HOME/bin/nvcc
	fi
fi
if [ -z "$nvcc" ] || [ ! -x "$nvcc" ]; then
	die "nvcc not found (PATH, $CUDA_HOME/bin): HAMi-core's CMakeLists runs find_package(CUDA REQUIRED) for its tests, which needs a CUDA toolkit's nvcc; set HAMI_CORE_NVCC"
fi
toolkit_root=$(cd "$(dirname "$nvcc")/.." && pwd)

# --- configure and build ----------------------------------------------------------------------
# The options of HAMi-core's own build.sh. CMAKE_BUILD_TYPE=Debug is what upstream ships and is
# required: its Release flags add -fvisibility=hidden, which leaves dlsym the only exported
# symbol, so no cu*/nvml* call would be intercepted.
opts=(
	-DDLSYM_HOOK_ENABLE=1
	-DMULTIPROCESS_LIMIT_ENABLE=1
	-DHOOK_MEMINFO_ENABLE=1
	-DHOOK_NVML_ENABLE=1
	-DCMAKE_BUILD_TYPE=Debug
	-DTEST_DEVICE_ID=0
	-DCUDA_TOOLKIT_ROOT_DIR="$toolkit_root"
	# The same bytes from the same inputs: no temporary folder name in the debug information.
	-DCMAKE_C_FLAGS="-ffile-prefix-map=$work=/hami-core"
)
[ -z "$linker_flags" ] || opts+=(-DCMAKE_SHARED_LINKER_FLAGS="$linker_flags")
cmake_version=$("$CMAKE" --version | sed -n '1s/^cmake version \([0-9][0-9]*\)\..*/\1/p')
# CMake 4 refuses cmake_minimum_required(VERSION 2.8.11), which HAMi-core declares.
if [ "${cmake_version:-0}" -ge 4 ]; then
	opts+=(-DCMAKE_POLICY_VERSION_MINIMUM=3.5)
fi
if [ -n "${HAMI_CORE_CMAKE_OPTIONS:-}" ]; then
	read -r -a extra <<<"$HAMI_CORE_CMAKE_OPTIONS"
	opts+=("${extra[@]}")
fi
jobs=${HAMI_CORE_JOBS:-$(nproc 2>/dev/null || echo 2)}

t0=$SECONDS
log "configuring ($("$CMAKE" --version | head -n 1), nvcc $nvcc)"
if ! CUDA_HOME=$work/cuda-home "$CMAKE" -S "$src" -B "$work/build" "${opts[@]}" >"$work/configure.log" 2>&1; then
	tail -n 30 "$work/configure.log" >&2
	die "cmake configure failed (log above)"
fi
log "building libvgpu.so (-j$jobs)"
if ! "$CMAKE" --build "$work/build" --target vgpu -- -j"$jobs" >"$work/build.log" 2>&1; then
	grep -E 'error|Error' "$work/build.log" | head -n 40 >&2 || tail -n 30 "$work/build.log" >&2
	die "build failed (errors above)"
fi
lib_out=$work/build/libvgpu.so
[ -f "$lib_out" ] || die "the build finished without $lib_out"
log "built in $((SECONDS - t0)) s"

# --- checks -----------------------------------------------------------------------------------
if command -v nm >/dev/null 2>&1; then
	exported=$(nm -D --defined-only "$lib_out" | sed 's/.* //')
	for s in dlsym cuInit cuMemAlloc_v2 cuMemGetInfo_v2 nvmlDeviceGetMemoryInfo; do
		grep -qx "$s" <<<"$exported" || die "libvgpu.so does not export $s: it would not intercept CUDA (was it built with CMAKE_BUILD_TYPE=Release?)"
	done
else
	log "nm not found: exported symbols not checked"
fi
if command -v objdump >/dev/null 2>&1; then
	glibc=$(objdump -T "$lib_out" | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -n 1)
	log "libvgpu.so needs glibc >= ${glibc:-?} in every container it is preloaded into"
	if [ -n "${HAMI_CORE_MAX_GLIBC:-}" ] && [ -n "$glibc" ] &&
		[ "$(printf '%s\n%s\n' "$glibc" "$HAMI_CORE_MAX_GLIBC" | sort -V | tail -n 1)" != "$HAMI_CORE_MAX_GLIBC" ]; then
		die "libvgpu.so needs glibc $glibc, newer than HAMI_CORE_MAX_GLIBC=$HAMI_CORE_MAX_GLIBC: build it on an older distribution"
	fi
elif [ -n "${HAMI_CORE_MAX_GLIBC:-}" ]; then
	die "objdump not found: cannot check HAMI_CORE_MAX_GLIBC (install binutils)"
fi

mkdir -p "$(dirname "$out")"
cp "$lib_out" "$out.tmp.$$"
chmod 0755 "$out.tmp.$$"
mv -f "$out.tmp.$$" "$out"
if command -v sha256sum >/dev/null 2>&1; then
	log "HAMi-core $HAMI_CORE_COMMIT: $(sha256sum "$out" | cut -d' ' -f1)"
fi
echo "$out"
