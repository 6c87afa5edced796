//go:build fakenvml

package main

import (
	"flag"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/gpushare/gpushare/pkg/deviceplugin/nvml"
	"github.com/gpushare/gpushare/pkg/deviceplugin/nvml/mockhost"
)

// fakeOptions select a go-nvml mock host instead of the real library (fakenvml builds only).
type fakeOptions struct {
	host      string
	memory    string
	reserved  string
	gpus      int
	links     string
	processes string
	xids      string
}

func (f *fakeOptions) addFlags(fs *flag.FlagSet) {
	fs.StringVar(&f.host, "fake-gpus", "dgxa100", "mock host to serve: "+strings.Join(mockhost.Names(), ", "))
	fs.StringVar(&f.memory, "fake-gpu-memory", "", "memory of every fake GPU, e.g. 40Gi (default: the mock's own)")
	fs.IntVar(&f.gpus, "fake-gpu-count", 0, "keep only this many GPUs of the mock host (0 = all)")
	fs.StringVar(&f.links, "fake-gpu-links", mockhost.LinksNVSwitch, "how the fake GPUs are joined: "+strings.Join(mockhost.LinkLayouts(), ", "))
	fs.StringVar(&f.processes, "fake-gpu-processes-file", "", `JSON file of the fake GPUs' compute processes by NVML index, read again when it changes: {"0": [{"pid": 1234, "usedBytes": 1073741824}]}; a missing file is no processes (write it whole, by rename)`)
	fs.StringVar(&f.reserved, "fake-gpu-reserved-memory", "", "memory the driver reserves of every fake GPU (nvmlDeviceGetMemoryInfo_v2), e.g. 450Mi (default 0)")
	fs.StringVar(&f.xids, "fake-gpu-xid-file", "", `file whose appended lines "<NVML index|all> <xid>" inject critical XID events, one each (append only)`)
}

// openNVML builds the mock host.
func openNVML(f *fakeOptions) (nvml.Interface, error) {
	o := mockhost.Options{GPUs: f.gpus, Links: f.links}
	var err error
	if o.MemoryBytes, err = fakeBytes("--fake-gpu-memory", f.memory, "40Gi"); err != nil {
		return nil, err
	}
	if o.ReservedBytes, err = fakeBytes("--fake-gpu-reserved-memory", f.reserved, "450Mi"); err != nil {
		return nil, err
	}
	h, err := mockhost.New(f.host, o)
	if err != nil {
		return nil, err
	}
	if f.processes != "" {
		h.FollowProcessesFile(f.processes)
	}
	if f.xids != "" {
		h.FollowXIDFile(f.xids)
	}
	return nvml.New(h), nil
}

// fakeBytes parses a fake size flag: 0 when empty, else a positive quantity.
func fakeBytes(flagName, v, example string) (uint64, error) {
	if v == "" {
		return 0, nil
	}
	q, err := resource.ParseQuantity(v)
	if err != nil || q.Value() <= 0 {
		return 0, fmt.Errorf("%s %q: want a positive quantity such as %s", flagName, v, example)
	}
	return uint64(q.Value()), nil //nolint:gosec // G115: positive, checked above
}
