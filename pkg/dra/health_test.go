package dra

import (
	"context"
	"errors"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"

	"github.com/gpushare/gpushare/pkg/deviceplugin"
	"github.com/gpushare/gpushare/pkg/deviceplugin/nvml"
)

// taints renders the taints of the published devices, by device name.
func taints(devs []resourceapi.Device) map[string]string {
	out := map[string]string{}
	for _, d := range devs {
		for _, tn := range d.Taints {
			out[d.Name] += tn.Key + "=" + tn.Value + ":" + string(tn.Effect)
			if tn.TimeAdded == nil {
				out[d.Name] += " (no time)"
			}
		}
	}
	return out
}

// TestXIDTaintsDevice: a critical XID from NVML taints its card NoSchedule in the published
// slice (the device stays published), and the pods of the claims on it get a Warning event;
// an XID of the ignored list (the application's fault) changes nothing.
func TestXIDTaintsDevice(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	td := newTestDriver(t, cfg, testHost(t))
	td.mustPrepare(t, makeClaim("on1").device("gpu-1", 4*gib, 0).obj(), makeClaim("on2").device("gpu-2", 4*gib, 0).obj())
	ctx, cancel := context.WithCancel(td.ctx)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		td.watchHealth(ctx)
	}()
	td.host.InjectXID(2, 13) // ignored: the application's fault
	td.host.InjectXID(1, 79) // fallen off the bus
	var got map[string]string
	err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		got = taints(td.pub.devices(t))
		return len(got) > 0, nil
	})
	if err != nil {
		t.Fatalf("no taint published: %v", err)
	}
	cancel()
	<-done
	// XID 13 was handled before 79 (one event loop): had it tainted gpu-2, it would show.
	if diff := cmp.Diff(map[string]string{"gpu-1": "gpushare.aliyun.com/unhealthy=xid-79:NoSchedule"}, got); diff != "" {
		t.Errorf("taints (-want,+got):\n%s", diff)
	}
	if n := len(td.pub.devices(t)); n != 4 {
		t.Errorf("%d devices published, want all 4 (a tainted card stays published)", n)
	}
	if diff := cmp.Diff([]string{"pod-on1 " + deviceplugin.ReasonGPUUnhealthy}, warnings(t, td)); diff != "" {
		t.Errorf("warning events (-want,+got):\n%s", diff)
	}
}

// warnings lists the Warning events recorded, as "pod reason".
func warnings(t *testing.T, td *testDriver) []string {
	t.Helper()
	evs, err := td.client.CoreV1().Events("default").List(td.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range evs.Items {
		if e.Type == v1.EventTypeWarning {
			out = append(out, e.InvolvedObject.Name+" "+e.Reason)
		}
	}
	sort.Strings(out)
	return out
}

func TestMarkSick(t *testing.T) {
	since := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		events []nvml.Event
		want   map[string]string
	}{
		{name: "one card", events: []nvml.Event{{UUID: uuid(3), XID: 48}}, want: map[string]string{"gpu-3": "gpushare.aliyun.com/unhealthy=xid-48:NoSchedule"}},
		{name: "no card named: every card", events: []nvml.Event{{XID: 79}}, want: map[string]string{
			"gpu-0": "gpushare.aliyun.com/unhealthy=xid-79:NoSchedule", "gpu-1": "gpushare.aliyun.com/unhealthy=xid-79:NoSchedule",
			"gpu-2": "gpushare.aliyun.com/unhealthy=xid-79:NoSchedule", "gpu-3": "gpushare.aliyun.com/unhealthy=xid-79:NoSchedule"}},
		{name: "a second XID keeps the first taint", events: []nvml.Event{{UUID: uuid(0), XID: 48}, {UUID: uuid(0), XID: 79}},
			want: map[string]string{"gpu-0": "gpushare.aliyun.com/unhealthy=xid-48:NoSchedule"}},
		{name: "a card this node does not have", events: []nvml.Event{{UUID: "GPU-elsewhere", XID: 79}}, want: map[string]string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			td := newTestDriver(t, testConfig(t, t.TempDir()), testHost(t))
			if err := td.publish(td.ctx); err != nil {
				t.Fatal(err)
			}
			for _, ev := range tt.events {
				td.markSick(td.ctx, ev, since)
			}
			devs := td.pub.devices(t)
			if diff := cmp.Diff(tt.want, taints(devs)); diff != "" {
				t.Errorf("taints (-want,+got):\n%s", diff)
			}
			for _, d := range devs {
				for _, tn := range d.Taints {
					if !tn.TimeAdded.Time.Equal(since) {
						t.Errorf("%s tainted at %v, want %v", d.Name, tn.TimeAdded, since)
					}
				}
			}
			report := td.healthReport(mustHealth(td), since)
			var unhealthy []string
			for _, h := range report.Devices {
				if h.Health == kubeletplugin.HealthStatusUnhealthy && strings.HasPrefix(h.Message, "critical XID") {
					unhealthy = append(unhealthy, h.DeviceName)
				}
			}
			if len(report.Devices) != 4 || !slices.Equal(unhealthy, sortedKeys(tt.want)) {
				t.Errorf("kubelet health report %+v: want 4 devices, unhealthy %v", report.Devices, sortedKeys(tt.want))
			}
		})
	}
}

func mustHealth(td *testDriver) map[int]sickness {
	sick, _ := td.cards.health()
	return sick
}

func sortedKeys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestWatchHealthStatus: kubelet gets every card's health at once and again when a card is
// tainted; without the health check the driver says it reports none.
func TestWatchHealthStatus(t *testing.T) {
	td := newTestDriver(t, testConfig(t, t.TempDir()), testHost(t))
	ctx, cancel := context.WithCancel(td.ctx)
	defer cancel()
	reports := make(chan kubeletplugin.DeviceHealthReport)
	errc := make(chan error, 1)
	go func() { errc <- td.WatchHealthStatus(ctx, reports) }()
	render := func(r kubeletplugin.DeviceHealthReport) []string {
		var out []string
		for _, h := range r.Devices {
			out = append(out, h.PoolName+"/"+h.DeviceName+" "+string(h.Health))
		}
		return out
	}
	want := []string{"n1/gpu-0 Healthy", "n1/gpu-1 Healthy", "n1/gpu-2 Healthy", "n1/gpu-3 Healthy"}
	if diff := cmp.Diff(want, render(<-reports)); diff != "" {
		t.Errorf("first report (-want,+got):\n%s", diff)
	}
	td.markSick(td.ctx, nvml.Event{UUID: uuid(2), XID: 79}, time.Now())
	want[2] = "n1/gpu-2 Unhealthy"
	if diff := cmp.Diff(want, render(<-reports)); diff != "" {
		t.Errorf("report after the XID (-want,+got):\n%s", diff)
	}
	cancel()
	if err := <-errc; err != nil {
		t.Errorf("WatchHealthStatus = %v after ctx ended, want nil", err)
	}

	cfg := testConfig(t, t.TempDir())
	cfg.HealthCheck = false
	off := newTestDriver(t, cfg, testHost(t))
	if err := off.WatchHealthStatus(td.ctx, make(chan kubeletplugin.DeviceHealthReport)); !errors.Is(err, kubeletplugin.ErrHealthNotSupported) {
		t.Errorf("without the health check WatchHealthStatus = %v, want %v", err, kubeletplugin.ErrHealthNotSupported)
	}
}
