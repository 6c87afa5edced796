// Command gpushare-sim replays an openb trace through the extender's cache and placement
// policies and reports the GPU allocation ratio, as in the FGD paper's protocol. See
// docs/placement.md.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/gpushare/gpushare/pkg/scheduler"
	"github.com/gpushare/gpushare/pkg/sim"
)

func main() {
	cfg := sim.DefaultConfig()
	cfg.AddFlags(flag.CommandLine, scheduler.NewPolicies())
	flag.Parse()
	if err := cfg.Validate(scheduler.NewPolicies()); err != nil {
		fmt.Fprintln(os.Stderr, "gpushare-sim:", err)
		os.Exit(2)
	}
	if err := sim.Main(&cfg, scheduler.NewPolicies(), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "gpushare-sim:", err)
		os.Exit(1)
	}
}
