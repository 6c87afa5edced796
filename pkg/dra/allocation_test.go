package dra

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/utils/ptr"
)

// TestPrepareRefuses: an allocation the driver cannot hold the claim to gets an error of its
// own that says why, and nothing of it is left on the node; the claims beside it are prepared.
func TestPrepareRefuses(t *testing.T) {
	for _, tt := range refusals() {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig(t, t.TempDir())
			td := newTestDriver(t, cfg, testHost(t))
			held := makeClaim("held").device("gpu-2", 9*gib, 20).obj()
			td.mustPrepare(t, held)
			beside := makeClaim("beside").device("gpu-3", 4*gib, 0).obj()
			errs := td.prepare(t, tt.claim, beside)
			err := errs[tt.claim.UID]
			if !errors.Is(err, tt.wantIs) || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("prepare = %v, want an error wrapping %v containing %q", err, tt.wantIs, tt.wantMsg)
			}
			if errs[beside.UID] != nil {
				t.Errorf("the claim beside it: %v", errs[beside.UID])
			}
			if _, err := os.Stat(filepath.Join(cfg.CDIRoot, "gpushare.aliyun.com_claim_"+string(tt.claim.UID)+".json")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("a refused claim has a CDI spec: %v", err)
			}
			if _, err := os.Stat(filepath.Join(cfg.Enforce.StateDir, "pods", string(tt.claim.UID))); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("a refused claim has a counter folder: %v", err)
			}
		})
	}
}

// refusal is a claim the driver must refuse next to a claim "held" of 9 GiB and 20 cores on
// gpu-2, and the error it must give.
type refusal struct {
	name    string
	claim   *resourceapi.ResourceClaim
	wantIs  error
	wantMsg string
}

func refusals() []refusal {
	return []refusal{
		{
			name: "another driver's device only",
			claim: makeClaim("other").device("gpu-0", 4*gib, 0).
				with(func(r *resourceapi.DeviceRequestAllocationResult) { r.Driver = "gpu.nvidia.com" }).obj(),
			wantIs: ErrBadAllocation, wantMsg: "has no device of driver gpushare.aliyun.com (it has gpu.nvidia.com/n1/gpu-0)",
		},
		{
			name:   "a device the node does not publish",
			claim:  makeClaim("unknown").device("gpu-7", 4*gib, 0).obj(),
			wantIs: ErrUnknownDevice, wantMsg: `unknown device "gpu-7": this node publishes gpu-0, gpu-1, gpu-2, gpu-3`,
		},
		{
			name:   "no consumed memory (the allocator runs without consumable capacity)",
			claim:  makeClaim("nomem").device("gpu-0", -1, 0).obj(),
			wantIs: ErrBadAllocation, wantMsg: "no consumed memory capacity (kube-scheduler must run with the DRAConsumableCapacity feature gate",
		},
		{
			name: "another node's pool",
			claim: makeClaim("pool").device("gpu-0", 4*gib, 0).
				with(func(r *resourceapi.DeviceRequestAllocationResult) { r.Pool = "n2" }).obj(),
			wantIs: ErrBadAllocation, wantMsg: `pool "n2" is not this node's ("n1")`,
		},
		{
			name: "admin access",
			claim: makeClaim("admin").device("gpu-0", 4*gib, 0).
				with(func(r *resourceapi.DeviceRequestAllocationResult) { r.AdminAccess = ptr.To(true) }).obj(),
			wantIs: ErrBadAllocation, wantMsg: "admin access is not supported",
		},
		{
			name:   "more memory than the card has",
			claim:  makeClaim("big").device("gpu-0", 40*gib, 0).obj(),
			wantIs: ErrBadAllocation, wantMsg: "consumed 42949672960 bytes of gpu-0, which has 41875931136",
		},
		{
			name:   "two cards with different compute caps",
			claim:  makeClaim("caps").device("gpu-0", 4*gib, 20).device("gpu-1", 4*gib, 30).obj(),
			wantIs: ErrBadAllocation, wantMsg: "consumed 20 cores of gpu-0 but 30 of gpu-1",
		},
		{
			name:   "a compute cap over 100%",
			claim:  makeClaim("cores").device("gpu-0", 4*gib, 101).obj(),
			wantIs: ErrBadAllocation, wantMsg: "consumed 101 cores of gpu-0: want 0 to 100",
		},
		{
			name: "reserved for no pod",
			claim: func() *resourceapi.ResourceClaim {
				c := makeClaim("nopod").device("gpu-0", 4*gib, 0).obj()
				c.Status.ReservedFor = nil
				return c
			}(),
			wantIs: ErrBadAllocation, wantMsg: "is reserved for no pod",
		},
		{
			name:   "more than the claims prepared on the card leave",
			claim:  makeClaim("over").device("gpu-2", 31*gib, 0).obj(),
			wantIs: ErrOvercommit, wantMsg: "would put 42949672960 of 41875931136 bytes and 20% of the SMs of gpu-2 in use with the prepared claims default/held",
		},
		{
			name:   "more compute than the claims prepared on the card leave",
			claim:  makeClaim("overcores").device("gpu-2", 1*gib, 81).obj(),
			wantIs: ErrOvercommit, wantMsg: "and 101% of the SMs of gpu-2",
		},
	}
}
