package main

import (
	"fmt"
	"time"

	"github.com/gpushare/gpushare/test/e2e/cmd/internal/benchrun"
)

// options is the command line.
type options struct {
	// Flags are --dir, --extender, --extender-args and --scheduler-config (the
	// KubeSchedulerConfiguration of the extender's runs).
	benchrun.Flags
	nodes, pods, runs int
	// schedulerQPS and schedulerBurst are kube-scheduler's client limits; 0 keeps its defaults.
	schedulerQPS   float64
	schedulerBurst int
	// stall ends a run that bound nothing for this long.
	stall time.Duration
	// profile, if set, is a folder for a CPU profile of the extender in each extender run.
	profile string
	// createQPS limits the client that creates the pods (burst twice that); 0 leaves it
	// unlimited, so that the pods arrive as fast as kube-apiserver accepts them.
	createQPS float64
	// replicas is the number of extender replicas of the extender's runs.
	replicas int
	// front is how the replicas are balanced: frontRequest, frontRequestLeader or
	// frontConnection; frontSet says that --front was given (then even one replica is reached
	// through the front).
	front    string
	frontSet bool
	// handover: before the burst the leader is stopped (it releases the Lease), another replica
	// takes over and the stopped one starts again, as a follower, on its port.
	handover bool
	// extenderOnly skips kube-scheduler alone's runs: for comparing extender setups, each
	// invocation then takes a third of the time.
	extenderOnly bool
	// fence: the extender's runs install its RBAC and admission policies (the fence among them)
	// and run the replicas as its service account, so that every Binding is checked.
	fence bool
	// dra runs DRA mode's runs (dra.go): ResourceSlices and claims instead of gpu-mem, the
	// extender's runs with --dra-mode behind config/dra/scheduler-config.yaml.
	dra bool
}

// The fronts of --front.
const (
	frontRequest    = "request"
	frontConnection = "connection"
	// frontRequestLeader is frontRequest checking /readyz/leader, as a front that checks its
	// backends' health itself is configured to: the calls go to the leader alone.
	frontRequestLeader = "request-leader"
	// frontNone is reported when kube-scheduler calls the one replica directly.
	frontNone = "none"
)

// maxReplicas bounds --replicas: replica i is named by the letter letters[i].
const maxReplicas = len(letters)

// frontUsed is the front of the extender's runs: none for one replica unless --front was given.
func (o options) frontUsed() string {
	if o.replicas == 1 && !o.frontSet {
		return frontNone
	}
	return o.front
}

// check checks the command line.
func (o options) check() error {
	if o.nodes < 1 || o.pods < 1 || o.runs < 1 {
		return fmt.Errorf("--nodes, --pods and --runs must be positive")
	}
	if o.replicas < 1 || o.replicas > maxReplicas {
		return fmt.Errorf("--replicas must be between 1 and %d", maxReplicas)
	}
	if o.fence && o.replicas < 2 {
		return fmt.Errorf("--fence needs --replicas 2 or more: the fence is the leader's Lease")
	}
	if o.front != frontRequest && o.front != frontConnection && o.front != frontRequestLeader {
		return fmt.Errorf("--front must be %s, %s or %s, not %q", frontRequest, frontRequestLeader, frontConnection, o.front)
	}
	if err := o.checkDRA(); err != nil {
		return err
	}
	if o.pods > o.nodes*8*16/2 {
		return fmt.Errorf("%d pods of up to 8 GiB may not fit %d nodes of 8 x 16 GiB; use at most %d", o.pods, o.nodes, o.nodes*8*16/2)
	}
	return nil
}

// modes are the modes each run round goes through: kube-scheduler alone with its configuration
// alone (unless --extender-only), then with the extender binary ext and --scheduler-config.
func (o options) modes(alone, ext string) []mode {
	modes := []mode{{name: modeAlone, config: alone}, {name: modeExtender, config: o.SchedulerConfig, extender: ext}}
	if o.extenderOnly {
		return modes[1:]
	}
	return modes
}

// checkDRA refuses, with --dra, the flags of the device-plugin mode's extender setups: in DRA
// mode the extender neither binds nor elects a leader in these runs, and one replica is called
// directly.
func (o options) checkDRA() error {
	switch {
	case !o.dra:
		return nil
	case o.replicas != 1 || o.frontSet:
		return fmt.Errorf("--dra runs one extender replica, called directly: no --replicas or --front")
	case o.fence || o.handover:
		return fmt.Errorf("--fence and --handover are for the device-plugin mode, not --dra")
	}
	return nil
}
