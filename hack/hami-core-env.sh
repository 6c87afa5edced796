#!/usr/bin/env bash
# Lists the environment variables HAMi-core reads with getenv at the pinned commit
# (hack/hami-core.sh), resolving the names it reads through a #define or a "%s_%d" format.
# Usage: HAMI_CORE_SRC=<a HAMi-core clone> hack/hami-core-env.sh > pkg/contract/testdata/hami-core-getenv.txt
# (keep the file's header comment). Needs git; reads nothing from the network.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
: "${HAMI_CORE_SRC:?set HAMI_CORE_SRC to a HAMi-core git clone}"
commit=$(sed -n 's/^HAMI_CORE_COMMIT=\${HAMI_CORE_COMMIT:-\([0-9a-f]\{40\}\)}$/\1/p' "$ROOT/hack/hami-core.sh")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
git -C "$HAMI_CORE_SRC" archive "$commit" src | tar -x -C "$tmp"
{
	# getenv("NAME")
	grep -rhoE 'getenv\("[A-Z_0-9]+"\)' "$tmp/src" | sed -E 's/getenv\("([A-Z_0-9]+)"\)/\1/'
	# getenv(MACRO) with #define MACRO "NAME"
	for m in $(grep -rhoE 'getenv\([A-Z_0-9]+\)' "$tmp/src" | sed -E 's/getenv\(([A-Z_0-9]+)\)/\1/'); do
		grep -rhE "#define[[:space:]]+$m[[:space:]]+\"" "$tmp/src" | sed -E 's/.*"([^"]+)".*/\1/'
	done
	# getenv(env_name) after snprintf(env_name, ..., "%s_%d", MACRO, i): the macro's name
	for m in $(grep -rhoE 'snprintf\(env_name, *sizeof\(env_name\), *"%s_%d", *[A-Z_0-9]+' "$tmp/src" | sed -E 's/.*, *([A-Z_0-9]+)$/\1/'); do
		grep -rhE "#define[[:space:]]+$m[[:space:]]+\"" "$tmp/src" | sed -E 's/.*"([^"]+)".*/\1/'
	done
} | sort -u
