package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/klog/v2/ktesting"
)

// TestPrepareDRA: what the DRA row sets up before a GPU is needed, on go-nvml's mock. The
// driver prepares both claims on card 0; each container's CDI edits, resolved as a runtime
// would, pass the same check as device-plugin mode's Allocate (the card's UUID, the limit of
// its ask, the preload naming the library and the library, read-only); and the sampler's share
// source gives each container its ask on that card.
func TestPrepareDRA(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	r, _ := mockRun(t)
	cfg := draDriverConfig(filepath.Join(r.dir, "dra"), r.opts.library)
	cfg.SysfsRoot = t.TempDir()
	d, adm, pods, err := prepareDRA(ctx, r.nv, cfg, r.opts.asks())
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range adm {
		r.checkAllocate(a)
	}
	var got []string
	for _, c := range r.res.checks {
		got = append(got, c.Name+": "+map[bool]string{true: "pass", false: "FAIL " + c.Observed}[c.Pass])
	}
	want := []string{"dra-pod-a/main: " + viaPrepare + ": pass", "dra-pod-b/main: " + viaPrepare + ": pass"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("checks of the claims' CDI edits (-want,+got):\n%s", diff)
	}
	var shares []string
	for _, l := range d.ContainerShares(pods) {
		shares = append(shares, l.Pod+"/"+l.Container+" "+l.UUID+" "+mib(int64(l.Bytes))) //nolint:gosec // G115: GPU memory fits
	}
	if diff := cmp.Diff([]string{"dra-pod-a/main " + r.card.UUID + " 4096 MiB", "dra-pod-b/main " + r.card.UUID + " 2048 MiB"}, shares); diff != "" {
		t.Errorf("shares (-want,+got):\n%s", diff)
	}
}

// TestCDIResponse: a device's edits follow its spec's own; a device in no spec, or an ID that
// is not kind=name, is an error.
func TestCDIResponse(t *testing.T) {
	dir := t.TempDir()
	writeSpec := func(name, raw string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(raw), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeSpec("a.json", `{"cdiVersion":"0.6.0","kind":"example.com/gpu","containerEdits":{"env":["A=spec","B=spec"]},
		"devices":[{"name":"one","containerEdits":{"env":["B=device"],"mounts":[{"hostPath":"/h","containerPath":"/c","options":["ro","bind"]}]}}]}`)
	writeSpec("other.json", `{"cdiVersion":"0.6.0","kind":"other.com/gpu","devices":[{"name":"one","containerEdits":{"env":["A=other"]}}]}`)
	resp, err := cdiResponse(dir, []string{"example.com/gpu=one"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"A": "spec", "B": "device"}, resp.Envs); diff != "" {
		t.Errorf("env (-want,+got):\n%s", diff)
	}
	if len(resp.Mounts) != 1 || resp.Mounts[0].HostPath != "/h" || resp.Mounts[0].ContainerPath != "/c" || !resp.Mounts[0].ReadOnly {
		t.Errorf("mounts %+v, want /h on /c read-only", resp.Mounts)
	}
	for _, ids := range [][]string{{"example.com/gpu=two"}, {"example.com/gpu"}, nil} {
		if _, err := cdiResponse(dir, ids); err == nil {
			t.Errorf("cdiResponse(%q) = nil error", ids)
		}
	}
}
