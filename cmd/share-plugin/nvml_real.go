//go:build !fakenvml

package main

import (
	"flag"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpushare/gpushare/pkg/deviceplugin/nvml"
)

// fakeOptions is empty without the fakenvml build tag.
type fakeOptions struct{}

func (*fakeOptions) addFlags(*flag.FlagSet) {}

// openNVML loads the real libnvidia-ml.
func openNVML(*fakeOptions) (nvml.Interface, error) {
	return nvml.New(gonvml.New()), nil
}
