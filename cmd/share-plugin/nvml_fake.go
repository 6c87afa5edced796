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
	gpus      int
	links     string
	processes string
}

func (f *fakeOptions) addFlags(fs *flag.FlagSet) {
	fs.StringVar(&f.host, "fake-gpus", "dgxa100", "mock host to serve: "+strings.Join(mockhost.Names(), ", "))
	fs.StringVar(&f.memory, "fake-gpu-memory", "", "memory of every fake GPU, e.g. 40Gi (default: the mock's own)")
	fs.IntVar(&f.gpus, "fake-gpu-count", 0, "keep only this many GPUs of the mock host (0 = all)")
	fs.StringVar(&f.links, "fake-gpu-links", mockhost.LinksNVSwitch, "how the fake GPUs are joined: "+strings.Join(mockhost.LinkLayouts(), ", "))
	fs.StringVar(&f.processes, "fake-gpu-processes-file", "", `JSON file of the fake GPUs' compute processes by NVML index, read again when it changes: {"0": [{"pid": 1234, "usedBytes": 1073741824}]}; a missing file is no processes (write it whole, by rename)`)
}

// openNVML builds the mock host.
func openNVML(f *fakeOptions) (nvml.Interface, error) {
	o := mockhost.Options{GPUs: f.gpus, Links: f.links}
	if f.memory != "" {
		q, err := resource.ParseQuantity(f.memory)
		if err != nil || q.Value() <= 0 {
			return nil, fmt.Errorf("--fake-gpu-memory %q: want a positive quantity such as 40Gi", f.memory)
		}
		o.MemoryBytes = uint64(q.Value())
	}
	h, err := mockhost.New(f.host, o)
	if err != nil {
		return nil, err
	}
	if f.processes != "" {
		h.FollowProcessesFile(f.processes)
	}
	return nvml.New(h), nil
}
