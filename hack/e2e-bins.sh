#!/usr/bin/env bash
# Builds the pinned real-cluster binaries from the Go module proxy into bin/e2e/$K8S_VERSION/:
#   kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl
#                                                  (k8s.io/kubernetes, module test/e2e)
#   etcd                                           (go.etcd.io/etcd/server/v3, module hack/tools/etcd)
#   containerd containerd-shim-runc-v2             (github.com/containerd/containerd/v2, module
#                                                  hack/tools/containerd: CDI for the DRA real node)
#   kwok                                           (sigs.k8s.io/kwok/cmd/kwok)
# A binary already present is skipped; delete the folder to rebuild.
# Usage: hack/e2e-bins.sh            prints the bin folder on its last line
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/hack/versions.sh"
BIN=${E2E_BIN:-$ROOT/bin/e2e/$K8S_VERSION}
mkdir -p "$BIN"
# One set of flags for every build and test in test/e2e, so that the test compile reuses the
# cached Kubernetes packages instead of rebuilding them.
export GOFLAGS="-trimpath $(go env GOFLAGS | sed "s/-trimpath//")"
export GOTOOLCHAIN=${GOTOOLCHAIN:-local}
log() { printf '[e2e-bins %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
timed() { local t0=$SECONDS; "$@"; log "  done in $((SECONDS - t0)) s"; }

k8s=()
for c in kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl; do
	[ -x "$BIN/$c" ] || k8s+=("$c")
done
if [ ${#k8s[@]} -gt 0 ]; then
	minor=$(echo "$K8S_VERSION" | cut -d. -f2)
	ldf="-s -w -X k8s.io/component-base/version.gitVersion=$K8S_VERSION -X k8s.io/component-base/version.gitMajor=1"
	ldf+=" -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean"
	pkgs=()
	for c in "${k8s[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$c"); done
	log "building ${k8s[*]} $K8S_VERSION (cold: ~600 CPU-seconds, 6-20 min on 2 cores)"
	if [ ${#pkgs[@]} -eq 1 ]; then out="$BIN/${k8s[0]}"; else out="$BIN/"; fi
	(cd "$ROOT/test/e2e" && timed go build -ldflags "$ldf" -o "$out" "${pkgs[@]}")
else
	log "Kubernetes $K8S_VERSION binaries: present"
fi

if [ ! -x "$BIN/etcd" ]; then
	log "building etcd $ETCD_VERSION"
	(cd "$ROOT/hack/tools/etcd" && timed go build -ldflags "-s -w" -o "$BIN/etcd" go.etcd.io/etcd/server/v3)
else
	log "etcd: present"
fi

# containerd v2 for the real node of the DRA tests (Debian 12's containerd 1.6 has no CDI). Static
# (no cgo, so no btrfs snapshotter), with the tags of containerd's own Makefile. runc stays the
# host's: Debian 12's 1.1.5 runs its containers (containerd 2.4 is tested with runc 1.5).
# Cold: ~155 CPU-seconds, 2 min on 2 cores.
ctrd_ldf="-s -w -X github.com/containerd/containerd/v2/version.Version=$CONTAINERD_VERSION"
if [ ! -x "$BIN/containerd" ]; then
	log "building containerd $CONTAINERD_VERSION"
	(cd "$ROOT/hack/tools/containerd" && timed env CGO_ENABLED=0 go build -tags "urfave_cli_no_docs no_btrfs" \
		-ldflags "$ctrd_ldf" -o "$BIN/containerd" github.com/containerd/containerd/v2/cmd/containerd)
else
	log "containerd: present"
fi
if [ ! -x "$BIN/containerd-shim-runc-v2" ]; then
	log "building containerd-shim-runc-v2 $CONTAINERD_VERSION"
	(cd "$ROOT/hack/tools/containerd" && timed env CGO_ENABLED=0 go build -tags "urfave_cli_no_docs no_grpc" \
		-ldflags "$ctrd_ldf" -o "$BIN/containerd-shim-runc-v2" github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2)
else
	log "containerd-shim-runc-v2: present"
fi

if [ ! -x "$BIN/kwok" ]; then
	log "building kwok $KWOK_VERSION"
	GOBIN="$BIN" timed go install -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
	# kwok needs stage definitions at run time; keep the stock ones next to the binary.
	stages=$(go env GOMODCACHE)/sigs.k8s.io/kwok@$KWOK_VERSION/kustomize/stage
	for f in node/fast/node-initialize node/heartbeat/node-heartbeat pod/fast/pod-ready pod/fast/pod-complete pod/fast/pod-delete; do
		cat "$stages/$f.yaml"; echo "---"
	done > "$BIN/kwok-stages.yaml"
else
	log "kwok: present"
fi
log "binaries in $BIN"
echo "$BIN"
