package dra

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/deviceplugin"
	"github.com/gpushare/gpushare/pkg/enforce"
)

// ErrOvercommit is wrapped when a claim would take more of a card than the claims prepared on
// it leave: the driver is the last line of defence against two claims holding the same memory.
var ErrOvercommit = errors.New("card overcommitted")

// What a claim is: DRA prepares claims, not containers, so every container that references a
// claim gets all of it (its cards, one HAMi-core counter folder, one limit per card). Limits
// per container follow from a claim per container, which is what the admission step that
// turns gpu-mem asks into claims makes.

// PrepareResourceClaims prepares each claim for its pods (kubelet's NodePrepareResources):
// it resolves the claim's allocation on the node's cards, holds it to what it consumed through
// the enforcement backend (HAMi-core's mounts, per-card limits and compute cap, as device-plugin
// mode's Allocate gives a container) and writes one CDI device with them and the contract's
// env. Preparing a claim again writes the same spec. A claim that cannot be prepared gets an
// error of its own; the others are prepared.
func (d *Driver) PrepareResourceClaims(ctx context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	out := make(map[types.UID]kubeletplugin.PrepareResult, len(claims))
	var done []*record
	for _, claim := range claims {
		res, rec := d.prepareClaim(ctx, claim)
		out[claim.UID] = res
		if rec != nil {
			done = append(done, rec)
		}
	}
	d.republish(ctx)
	if mode, reason := d.backend.Mode(); mode == enforce.ModeUnavailable {
		for _, rec := range done {
			d.warnPods(ctx, rec, deviceplugin.ReasonMemoryLimitUnavailable, fmt.Sprintf("claim %s/%s runs WITHOUT a GPU memory limit on node %s: %s",
				rec.Namespace, rec.Name, d.cfg.NodeName, reason))
		}
	}
	return out, nil
}

// prepareClaim prepares one claim; the record is nil when it failed.
func (d *Driver) prepareClaim(ctx context.Context, claim *resourceapi.ResourceClaim) (kubeletplugin.PrepareResult, *record) {
	logger := klog.FromContext(ctx)
	a, err := d.resolve(claim)
	if err != nil {
		logger.Error(err, "Cannot prepare the claim", "claim", klog.KObj(claim))
		return kubeletplugin.PrepareResult{Err: err}, nil
	}
	rec := &record{UID: claim.UID, Namespace: claim.Namespace, Name: claim.Name, Pods: a.pods, Shares: a.shares}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.checkRoom(rec); err != nil {
		logger.Error(err, "Cannot prepare the claim", "claim", klog.KObj(claim))
		return kubeletplugin.PrepareResult{Err: err}, nil
	}
	edits, err := d.editsOf(rec)
	if err == nil {
		err = d.writeSpec(rec, edits)
	}
	if err != nil {
		logger.Error(err, "Cannot prepare the claim", "claim", klog.KObj(claim))
		return kubeletplugin.PrepareResult{Err: err}, nil
	}
	d.prepared[rec.UID] = *rec
	mode, _ := d.backend.Mode()
	logger.V(2).Info("Prepared", "claim", klog.KObj(claim), "pod", rec.pod(), "gpus", d.indexes(rec), "memoryLimit", mode,
		"cdiDevice", d.cdiID(rec.UID))
	return kubeletplugin.PrepareResult{Devices: d.devicesOf(claim.UID, a.results)}, rec
}

// checkRoom refuses rec when, with the other prepared claims (rec itself prepared before
// does not count twice), a card of it would hold more memory or compute cap than it has.
// Caller holds mu.
func (d *Driver) checkRoom(rec *record) error {
	for _, s := range rec.Shares {
		bytes, cores := s.Bytes, s.Cores
		var others []string
		for uid, other := range d.prepared {
			for _, o := range other.Shares {
				if uid != rec.UID && o.Index == s.Index {
					bytes += o.Bytes
					cores += o.Cores
					others = append(others, other.Namespace+"/"+other.Name)
				}
			}
		}
		if bytes > s.CardBytes || cores > contract.MaxCorePercent {
			slices.Sort(others)
			return fmt.Errorf("%w: claim %s/%s would put %d of %d bytes and %d%% of the SMs of %s in use with the prepared claims %s: "+
				"the allocation disagrees with this node (an unprepare may be pending)", ErrOvercommit, rec.Namespace, rec.Name,
				bytes, s.CardBytes, cores, s.Device, strings.Join(others, ", "))
		}
	}
	return nil
}

// editsOf makes the claim's enforcement files (its counter folder, named by the claim's UID
// and name) and returns its CDI edits: the contract's env for its cards and the backend's
// mounts and env. Caller holds mu (Collect must not run in between).
func (d *Driver) editsOf(rec *record) (cdispec.ContainerEdits, error) {
	cardBytes := make([]int64, len(rec.Shares))
	for i, s := range rec.Shares {
		cardBytes[i] = s.Bytes
	}
	edits, err := d.backend.Prepare(enforce.Request{PodUID: rec.UID, Container: rec.Name,
		Pod: rec.pod() + " (claim " + rec.Name + ")", CardBytes: cardBytes, CorePercent: int(rec.Shares[0].Cores)})
	if err != nil {
		return cdispec.ContainerEdits{}, fmt.Errorf("hold claim %s/%s to its memory: %w", rec.Namespace, rec.Name, err)
	}
	env := d.cardEnv(rec.Shares)
	maps.Copy(env, edits.Env)
	return containerEdits(env, edits.Mounts), nil
}

// cardEnv is the contract's env for a claim's cards (shares, by index): the UUIDs, the
// indexes, the claim's units (the container's, a claim being one container's) and the units
// of its first card. ALIYUN_COM_GPU_MEM_POD, the pod's total, is not set: a claim does not
// know the pod's other claims.
func (d *Driver) cardEnv(shares []share) map[string]string {
	unit := d.cfg.Names.UnitBytes()
	uuids := make([]string, len(shares))
	idx := make([]string, len(shares))
	var total int64
	for i, s := range shares {
		uuids[i], idx[i] = s.UUID, strconv.Itoa(s.Index)
		total += s.Bytes
	}
	return map[string]string{
		contract.EnvVisibleDevices: strings.Join(uuids, ","),
		contract.EnvIndex:          strings.Join(idx, ","),
		contract.EnvContainer:      strconv.FormatInt(total/unit, 10),
		contract.EnvDev:            strconv.FormatInt(shares[0].CardBytes/unit, 10),
	}
}

// devicesOf is kubelet's answer for a prepared claim: each allocated device with its share,
// the first carrying the claim's CDI device for every request (empty Requests), so that each
// container that references the claim gets it once.
func (d *Driver) devicesOf(uid types.UID, results []resourceapi.DeviceRequestAllocationResult) []kubeletplugin.Device {
	out := make([]kubeletplugin.Device, len(results))
	for i, r := range results {
		out[i] = kubeletplugin.Device{Requests: []string{r.Request}, PoolName: r.Pool, DeviceName: r.Device, ShareID: r.ShareID}
	}
	out[0].Requests, out[0].CDIDeviceIDs = nil, []string{d.cdiID(uid)}
	return out
}

// indexes lists a record's card indexes, for the log.
func (d *Driver) indexes(rec *record) []int {
	out := make([]int, len(rec.Shares))
	for i, s := range rec.Shares {
		out[i] = s.Index
	}
	return out
}

// UnprepareResourceClaims undoes PrepareResourceClaims (kubelet's NodeUnprepareResources, once
// no container of the claims' pods runs): it removes each claim's CDI spec and then, through
// the backend's Collect, the enforcement files of every claim no longer prepared. A claim that
// is not prepared is no error.
func (d *Driver) UnprepareResourceClaims(ctx context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	out := make(map[types.UID]error, len(claims))
	d.mu.Lock()
	for _, c := range claims {
		out[c.UID] = d.removeSpec(c.UID)
		if out[c.UID] == nil {
			delete(d.prepared, c.UID)
			klog.FromContext(ctx).V(2).Info("Unprepared", "claim", c.NamespacedName, "uid", c.UID)
		}
	}
	d.collectLocked(ctx)
	d.mu.Unlock()
	d.republish(ctx)
	return out, nil
}

// collectLocked removes the enforcement files of every claim not prepared. Caller holds mu.
func (d *Driver) collectLocked(ctx context.Context) {
	live := make([]types.UID, 0, len(d.prepared))
	for uid := range d.prepared {
		live = append(live, uid)
	}
	d.backend.Collect(ctx, live, time.Now())
}

// warnPods records a Warning event on each pod rec is reserved for; failures are logged.
func (d *Driver) warnPods(ctx context.Context, rec *record, reason, msg string) {
	for _, p := range rec.Pods {
		pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: rec.Namespace, Name: p.Name, UID: p.UID}}
		if err := deviceplugin.WarnPod(ctx, d.client, d.cfg.NodeName, pod, reason, msg); err != nil {
			klog.FromContext(ctx).Error(err, "Cannot warn the pod", "pod", klog.KObj(pod), "reason", reason)
		}
	}
}
