// Command gpushare-sim replays an openb trace through the extender's cache and placement
// policies and reports the GPU allocation ratio, as in the FGD paper's protocol. See
// docs/placement.md.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/gpushare/gpushare/pkg/placement/policies"
	"github.com/gpushare/gpushare/pkg/sim"
)

func main() {
	cfg := sim.DefaultConfig()
	cfg.AddFlags(flag.CommandLine, policies.NewRegistry())
	flag.Parse()
	if err := cfg.Validate(policies.NewRegistry()); err != nil {
		fmt.Fprintln(os.Stderr, "gpushare-sim:", err)
		os.Exit(2)
	}
	if err := sim.Main(&cfg, policies.NewRegistry(), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "gpushare-sim:", err)
		os.Exit(1)
	}
}
