#!/usr/bin/env bash
# make demo: builds what it needs, starts a local cluster (etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler with config/scheduler-config.yaml, the gpushare
# extender, fake GPU nodes kept Ready by kwok and, as root, a real kubelet node "localhost" with
# containerd, runc and share-plugin on mocked GPUs), installs the RBAC and the admission policies
# a real install applies (config/extender/rbac.yaml, config/share-plugin/rbac.yaml,
# config/admission/), shows one bad ask refused at the door, applies config/samples/ and prints
# where the pods landed. On the real node the share-plugin holds containers to their ask
# (--memory-limit=hami-core) with a STAND-IN library (test/e2e/testdata/hami-core-stand-in.c: not
# HAMi-core, it limits nothing; there is no GPU here), its mocked cards report what the driver
# reserves, and the demo injects a critical XID on the real-node pod's card to show what an
# operator sees. The cluster keeps running; `make demo-down` stops it (by PID).
# DEMO_REAL_NODE=0 skips the real node.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
DIR=${DEMO_DIR:-$ROOT/.demo}
export GOFLAGS="-trimpath $(go env GOFLAGS | sed 's/-trimpath//')"
export GOTOOLCHAIN=${GOTOOLCHAIN:-local}
log() { printf '[demo %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
T0=$SECONDS

if [ -f "$DIR/pids" ]; then
	log "a demo cluster is already running in $DIR: stopping it first"
	"$ROOT/hack/demo-down.sh"
fi
# tmpfs counter folders a crashed demo left mounted under its state folder (demo-down undoes them)
awk -v d="$DIR/" 'index($2, d) == 1 {print $2}' /proc/self/mounts | sort -r | while read -r m; do umount -l "$m" 2>/dev/null || true; done
rm -rf "$DIR"
mkdir -p "$DIR/bin"

# real_node_story runs a pod on the real node and shows what it bought: its card, its units,
# the memory limit it is held to and the preload list; then a critical XID on its card.
real_node_story() {
	log "real node: a pod on kubelet + containerd, its env and mounts from share-plugin's Allocate"
	kubectl apply -f hack/demo/real-node-pod.yaml >&2
	kubectl -n real-node wait --for=jsonpath='{.status.phase}'=Running pod/real-node-1 --timeout=120s >&2 || true
	sleep 1
	echo "\$ kubectl -n real-node logs real-node-1"
	kubectl -n real-node logs real-node-1 || true
	cat <<'NOTE'
  (CUDA_DEVICE_MEMORY_LIMIT_0 is the limit HAMi-core holds the container to on its card, and
   /etc/ld.so.preload makes every process load the library. This machine has no GPU: the library
   the demo mounts is a STAND-IN built from test/e2e/testdata/hami-core-stand-in.c, NOT HAMi-core,
   and it limits nothing. A real node runs the share-plugin image, which ships HAMi-core;
   `make gpu-check` proves its limits on a GPU.)
NOTE
	echo
	echo "\$ kubectl inspect gpushare -o wide   # each card: total, reserved by the driver, usable"
	kubectl inspect gpushare -o wide
	echo
	local card
	card=$(kubectl -n real-node get pod real-node-1 -o jsonpath='{.metadata.annotations.ALIYUN_COM_GPU_MEM_IDX}')
	[ -n "$card" ] || return 0
	log "real node: a critical XID (79, fallen off the bus) injected on GPU $card through the mocked NVML"
	echo "$card 79" >>"$DIR/xids"
	for _ in $(seq 1 60); do
		kubectl get node localhost -o jsonpath='{.metadata.annotations.gpushare\.io/gpus}' | grep -q '"healthy":false' && break
		sleep 0.5
	done
	sleep 1
	echo "\$ echo '$card 79' >> $DIR/xids   # the mocked NVML reports XID 79 on GPU $card"
	echo "\$ kubectl inspect gpushare -o wide"
	kubectl inspect gpushare -o wide
	echo
	echo "\$ kubectl -n real-node get events --field-selector reason=GPUUnhealthy"
	kubectl -n real-node get events --field-selector reason=GPUUnhealthy -o custom-columns='TYPE:.type,REASON:.reason,POD:.involvedObject.name,MESSAGE:.message'
	echo
}

# build_stand_in compiles the test suite's stand-in for HAMi-core's libvgpu.so: an empty shared
# object, so that Allocate answers as on a GPU node (the library mounted, /etc/ld.so.preload,
# the limits in the env). It is not HAMi-core and limits nothing.
build_stand_in() {
	mkdir -p "$DIR/hami-core"
	cc -shared -fPIC -o "$DIR/hami-core/libvgpu.so" test/e2e/testdata/hami-core-stand-in.c
}

# write_plugin_wrapper makes $DIR/bin/share-plugin run the fakenvml build with the flags of a
# node that enforces limits, on cards whose driver reserves 450 MiB (as a T4's does), and with
# an XID file the demo appends to (gpushare-local adds its own flags after these).
write_plugin_wrapper() {
	cat >"$DIR/bin/share-plugin" <<WRAP
#!/bin/sh
exec "$DIR/bin/share-plugin-fakenvml" --memory-limit=hami-core --hami-core-library="$DIR/hami-core/libvgpu.so" \\
	--hami-core-state-dir="$DIR/hami-core-state" --fake-gpu-reserved-memory=450Mi --fake-gpu-xid-file="$DIR/xids" "\$@"
WRAP
	chmod 0755 "$DIR/bin/share-plugin"
}

log "1/5 Kubernetes $(. hack/versions.sh; echo "$K8S_VERSION"), etcd and kwok (built once into bin/e2e/; the first build takes 10-20 min)"
BIN=$("$ROOT/hack/e2e-bins.sh" | tail -1)

log "2/5 gpushare binaries"
for c in extender kubectl-inspect-gpushare; do
	if ls cmd/$c/*.go >/dev/null 2>&1; then
		go build -o "$DIR/bin/$c" ./cmd/$c
		log "  built $c"
	fi
done
(cd test/e2e && go build -o "$DIR/bin/gpushare-local" ./cmd/gpushare-local)
cp "$BIN/kubectl" "$DIR/bin/kubectl"
REAL=()
if [ "${DEMO_REAL_NODE:-1}" = 1 ] && [ "$(id -u)" = 0 ] && ls cmd/share-plugin/*.go >/dev/null 2>&1; then
	if ! command -v containerd >/dev/null || ! command -v runc >/dev/null || ! command -v busybox >/dev/null; then
		log "  installing containerd runc busybox-static (apt) for the real node"
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
			containerd runc busybox-static) >"$DIR/apt.log" 2>&1 || log "  apt-get failed (see $DIR/apt.log): kwok nodes only"
	fi
	if command -v containerd >/dev/null && command -v runc >/dev/null && command -v busybox >/dev/null; then
		if [ -e /var/lib/kubelet/device-plugins ]; then
			log "  /var/lib/kubelet/device-plugins exists (another kubelet?): kwok nodes only"
		else
			go build -tags fakenvml -o "$DIR/bin/share-plugin-fakenvml" ./cmd/share-plugin
			(cd test/e2e && CGO_ENABLED=0 go build -o "$DIR/bin/pause" ./cmd/pause)
			build_stand_in
			write_plugin_wrapper
			log "  built share-plugin (mocked NVML), pause and the HAMi-core STAND-IN: a real kubelet node will join"
			REAL=(--share-plugin "$DIR/bin/share-plugin" --pause "$DIR/bin/pause")
		fi
	fi
else
	log "  not root (or DEMO_REAL_NODE=0): kwok nodes only"
fi

log "3/5 local cluster"
"$DIR/bin/gpushare-local" up --dir "$DIR" --bin "$BIN" --extender "$DIR/bin/extender" "${REAL[@]}"
. "$DIR/env"
export KUBECONFIG PATH="$DIR/bin:$PATH"

log "4/5 RBAC and admission policies, as a real install applies them"
kubectl apply -f config/extender/rbac.yaml -f config/share-plugin/rbac.yaml -f config/admission/ >&2
# A policy binding takes a moment to reach the API server's admission: wait until it refuses.
bad_ask() {
	cat <<'POD'
apiVersion: v1
kind: Pod
metadata:
  name: demo-bad-ask
spec:
  containers:
  - name: main
    image: registry.k8s.io/pause:3.10
    resources:
      limits:
        aliyun.com/gpu-mem: 10G   # 10 x 10^9 units, not 10 GiB: no GPU holds that
POD
}
refused=""
for _ in $(seq 1 40); do
	if out=$(bad_ask | kubectl create --dry-run=server -f - 2>&1); then
		sleep 0.5
		continue
	fi
	refused=$out
	break
done
echo "\$ kubectl create -f pod.yaml   # limits: {aliyun.com/gpu-mem: 10G}"
if [ -n "$refused" ]; then
	echo "$refused"
else
	log "the admission policy did not refuse the bad ask (is ValidatingAdmissionPolicy served?)"
	exit 1
fi
echo

log "5/5 sample workload (config/samples/)"
# wait until every pod exists and is bound (the StatefulSet's pods come from its controller)
wait_bound() {
	local want=$1
	for _ in $(seq 1 120); do
		local pending total
		pending=$(kubectl get pods -o jsonpath='{range .items[?(@.spec.nodeName=="")]}{.metadata.name}{" "}{end}')
		total=$(kubectl get pods -o name | wc -l)
		[ "$total" -ge "$want" ] && [ -z "$pending" ] && return 0
		sleep 0.5
	done
	log "pods still pending: $pending"
}
want=0
for f in config/samples/*.yaml; do   # in order, each bound before the next, so the story is stable
	if [ "$SCHEDULER_NAME" = default-scheduler ]; then
		kubectl apply -f "$f" >&2
	elif grep -q '^kind: Pod$' "$f"; then   # the extender runs in a second scheduler: name it
		sed "s|^spec:|spec:\n  schedulerName: $SCHEDULER_NAME|" "$f" | kubectl apply -f - >&2
	else
		sed "s|^    spec:|    spec:\n      schedulerName: $SCHEDULER_NAME|" "$f" | kubectl apply -f - >&2
	fi
	want=$((want + $(awk '/^kind: Pod$/{n=1} /^  replicas:/{n=$2} END{print n+0}' "$f")))
	wait_bound "$want"
done
if [ ${#REAL[@]} -gt 0 ]; then
	real_node_story
fi
kubectl get pods -o wide
echo
kubectl get pods -o custom-columns='POD:.metadata.name,NODE:.spec.nodeName,GPU:.metadata.annotations.ALIYUN_COM_GPU_MEM_IDX,GiB:.metadata.annotations.ALIYUN_COM_GPU_MEM_POD'
echo
if [ -x "$DIR/bin/kubectl-inspect-gpushare" ]; then
	kubectl inspect gpushare
	echo
	kubectl inspect gpushare -d
else
	echo "(kubectl inspect gpushare is not built yet; the extender's cache instead:)"
	# shellcheck disable=SC2086 # EXTENDER_CURL is several options
	curl -fsS $EXTENDER_CURL "$EXTENDER/gpushare-scheduler/inspect"
	echo
fi
cat <<MSG

Demo cluster running ($((SECONDS - T0)) s). Use it with:
  export KUBECONFIG=$KUBECONFIG PATH=$DIR/bin:\$PATH
  kubectl get pods -o wide
  curl $EXTENDER_CURL $EXTENDER/gpushare-scheduler/inspect
Logs are in $DIR/*.log. Stop everything with: make demo-down
MSG
