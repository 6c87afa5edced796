package main

import (
	"errors"
	"flag"
	"fmt"

	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/placement/policies"
	"github.com/gpushare/gpushare/pkg/scheduler"
)

// config is the extender's command line.
type config struct {
	address    string
	kubeconfig string
	master     string
	policy     string
	qps        float64
	burst      int
	maxBody    int64
	names      contract.Names
}

func defaultConfig() config {
	return config{address: ":39999", policy: policies.Default, qps: 200, burst: 400,
		maxBody: scheduler.DefaultMaxBodyBytes, names: contract.DefaultNames()}
}

func (c *config) addFlags(fs *flag.FlagSet, policies policies.Registry) {
	fs.StringVar(&c.address, "address", c.address, "host:port the extender listens on")
	fs.StringVar(&c.kubeconfig, "kubeconfig", c.kubeconfig, "kubeconfig file; empty means in-cluster")
	fs.StringVar(&c.master, "master", c.master, "API server address, overrides the kubeconfig's")
	fs.StringVar(&c.policy, "policy", c.policy, fmt.Sprintf("placement policy, one of %v", policies.Names()))
	fs.Float64Var(&c.qps, "kube-api-qps", c.qps, "queries per second to the API server (client-go's default 5 capped binds at ~2.7/s)")
	fs.IntVar(&c.burst, "kube-api-burst", c.burst, "burst of queries to the API server")
	fs.Int64Var(&c.maxBody, "max-body-bytes", c.maxBody, "largest request body accepted")
	c.names.AddFlags(fs)
}

func (c *config) validate(policies policies.Registry) error {
	var errs []error
	if _, err := policies.New(c.policy); err != nil {
		errs = append(errs, err)
	}
	if c.qps <= 0 || c.burst <= 0 {
		errs = append(errs, fmt.Errorf("--kube-api-qps and --kube-api-burst must be positive"))
	}
	if c.maxBody < 1024 {
		errs = append(errs, fmt.Errorf("--max-body-bytes must be at least 1024"))
	}
	if err := c.names.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
