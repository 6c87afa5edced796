package deviceplugin

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	st "github.com/gpushare/gpushare/pkg/cache/testing"
	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/deviceplugin/nvml/mockhost"
	"github.com/gpushare/gpushare/pkg/imagecheck"
)

// fakeImages is an ImageChecker that answers from a table of images and records what it was
// asked.
type fakeImages struct {
	mu      sync.Mutex
	answers map[string]error
	asked   []string
	paths   [][]string
}

func (f *fakeImages) Check(_ context.Context, image string, paths []string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, image)
	f.paths = append(f.paths, slices.Clone(paths))
	return f.answers[image]
}

// TestPreStartContainer: with an image checker and limits enforced, the plugin asks the kubelet
// for PreStartContainer and lets a container start only when its own image (found from its
// devices) cannot redirect the limit's mounts; it fails closed when it cannot tell.
func TestPreStartContainer(t *testing.T) {
	redirected := fmt.Errorf("image x: %w: /etc/ld.so.preload is a symlink to \"/tmp/p\"", imagecheck.ErrRedirected)
	tests := []struct {
		name     string
		mode     kubeletMode
		answers  map[string]error
		unknown  bool // PreStart for devices nobody holds
		wantCode map[string]codes.Code
		wantMsg  string
	}{
		{name: "clean images start", mode: listBeforeAdmit,
			wantCode: map[string]codes.Code{"i": codes.OK, "c": codes.OK}},
		{name: "image with a symlink refused", mode: listBeforeAdmit, answers: map[string]error{"app:1": redirected},
			wantCode: map[string]codes.Code{"i": codes.OK, "c": codes.PermissionDenied}, wantMsg: "container c not started: image x"},
		{name: "init container's image refused", mode: listBeforeAdmit, answers: map[string]error{"init:1": redirected},
			wantCode: map[string]codes.Code{"i": codes.PermissionDenied, "c": codes.OK}, wantMsg: "container i not started"},
		{name: "image that cannot be checked does not start", mode: listBeforeAdmit, answers: map[string]error{"app:1": errors.New("runtime down")},
			wantCode: map[string]codes.Code{"i": codes.OK, "c": codes.Unavailable}},
		{name: "without PodResources the ledger names the container", mode: noPodResources, answers: map[string]error{"app:1": redirected},
			wantCode: map[string]codes.Code{"i": codes.OK, "c": codes.PermissionDenied}},
		{name: "devices nobody holds", mode: listBeforeAdmit, unknown: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			images := &fakeImages{answers: tt.answers}
			pod := st.MakePod().Name("p").Node(testNode).NamedInitGPUMem("i", 2).NamedGPUMem("c", 4).
				Allocation(contract.Allocation{"init-0": {1: 2}, "0": {3: 4}}).Obj()
			pod.Spec.InitContainers[0].Image, pod.Spec.Containers[0].Image = "init:1", "app:1"
			h := newHarnessWith(t, tt.mode, mockhost.Options{MemoryBytes: 40 << 30},
				[]Option{WithMemoryLimit(limitConfig(t, t.TempDir())), WithImageChecker(images)}, pod)
			opts, _ := h.p.GetDevicePluginOptions(h.ctx, &pluginapi.Empty{})
			if !opts.GetPreStartRequired() || !h.p.pluginOptions().GetPreStartRequired() {
				t.Fatalf("options %v: PreStartRequired not set", opts)
			}
			if tt.unknown {
				_, err := h.p.PreStartContainer(h.ctx, &pluginapi.PreStartContainerRequest{DevicesIds: h.free[:2]})
				if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "no container of node n1 holds devices") {
					t.Fatalf("PreStartContainer = %v; want FailedPrecondition", err)
				}
				return
			}
			given := h.admitIDs(pod)
			for _, name := range []string{"i", "c"} {
				_, err := h.p.PreStartContainer(h.ctx, &pluginapi.PreStartContainerRequest{DevicesIds: given[name]})
				if got := status.Code(err); got != tt.wantCode[name] {
					t.Errorf("PreStartContainer for %s: %v; want %v", name, err, tt.wantCode[name])
				}
				if err != nil && tt.wantMsg != "" && tt.wantCode[name] == codes.PermissionDenied && !strings.Contains(err.Error(), tt.wantMsg) {
					t.Errorf("PreStartContainer for %s: %v; want it to say %q", name, err, tt.wantMsg)
				}
			}
			if want := []string{"init:1", "app:1"}; !slices.Equal(images.asked, want) {
				t.Errorf("images checked %v, want %v", images.asked, want)
			}
			for _, paths := range images.paths {
				if !slices.Contains(paths, "/etc/ld.so.preload") || !slices.Contains(paths, ContainerCacheDir) {
					t.Errorf("paths checked %v lack the preload or the counter folder", paths)
				}
			}
			if tt.wantMsg != "" {
				if msg := eventMessage(t, h, ReasonImageRefused); !strings.Contains(msg, tt.wantMsg) {
					t.Errorf("event %q does not say %q", msg, tt.wantMsg)
				}
			}
		})
	}
}

// TestPreStartNotAsked: without a checker, or with nothing mounted (no limits), the plugin does
// not ask for PreStartContainer, and answers it without checking.
func TestPreStartNotAsked(t *testing.T) {
	pod := st.MakePod().Name("p").Node(testNode).NamedGPUMem("c", 4).Allocation(contract.Allocation{"0": {3: 4}}).Obj()
	for name, opts := range map[string]func(t *testing.T) ([]Option, *fakeImages){
		"no checker": func(t *testing.T) ([]Option, *fakeImages) {
			return []Option{WithMemoryLimit(limitConfig(t, t.TempDir()))}, nil
		},
		"no limits": func(*testing.T) ([]Option, *fakeImages) {
			f := &fakeImages{}
			return []Option{WithImageChecker(f)}, f
		},
	} {
		t.Run(name, func(t *testing.T) {
			o, images := opts(t)
			h := newHarnessWith(t, listBeforeAdmit, mockhost.Options{MemoryBytes: 40 << 30}, o, pod)
			if h.p.pluginOptions().GetPreStartRequired() {
				t.Fatal("PreStartRequired set")
			}
			given := h.admitIDs(pod)
			if _, err := h.p.PreStartContainer(h.ctx, &pluginapi.PreStartContainerRequest{DevicesIds: given["c"]}); err != nil {
				t.Fatalf("PreStartContainer: %v", err)
			}
			if images != nil && len(images.asked) > 0 {
				t.Errorf("images checked: %v", images.asked)
			}
		})
	}
}

// admitIDs plays the kubelet admitting pod (as admit does) and returns each gpu-mem
// container's device IDs.
func (h *harness) admitIDs(pod *v1.Pod) map[string][]string {
	h.t.Helper()
	p := h.pod(pod.Name)
	if h.mode == listBeforeAdmit {
		h.kubelet.AddPod(p)
	}
	given := map[string][]string{}
	for _, c := range slices.Concat(p.Spec.InitContainers, p.Spec.Containers) {
		q, ok := c.Resources.Limits[contract.DefaultResourceName]
		if !ok {
			continue
		}
		ids := h.preferred(int32(q.Value())) //nolint:gosec // G115: test pods ask for a handful of units.
		if _, err := h.allocate(ids); err != nil {
			h.t.Fatalf("Allocate for %s: %v", c.Name, err)
		}
		given[c.Name] = ids
		if h.mode == listBeforeAdmit {
			h.kubelet.SetDevices(p, c.Name, contract.DefaultResourceName, ids)
		}
	}
	return given
}
