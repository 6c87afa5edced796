package benchrun

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gpushare/gpushare/test/e2e/framework"
)

// StartCluster builds the cluster of opts, starts its control plane (etcd, kube-apiserver) and,
// when namespace is not empty, creates that namespace. The caller stops the cluster; on an
// error StartCluster has stopped it.
func StartCluster(ctx context.Context, opts framework.Options, namespace string) (*framework.Cluster, error) {
	c, err := framework.New(opts)
	if err != nil {
		return nil, err
	}
	if err := startControlPlane(ctx, c, namespace); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

func startControlPlane(ctx context.Context, c *framework.Cluster, namespace string) error {
	if err := c.StartControlPlane(ctx); err != nil {
		return err
	}
	if namespace == "" {
		return nil
	}
	return c.EnsureNamespace(ctx, namespace)
}

// ExtenderArgs are a benchmark's extender flags: --v=1, extra (flags separated by spaces), more
// and, with profile, --profiling-address on a free port of 127.0.0.1, which it returns too
// ("" without profile).
func ExtenderArgs(extra string, profile bool, more ...string) (args []string, profileAddr string, err error) {
	args = append(append([]string{"--v=1"}, strings.Fields(extra)...), more...)
	if !profile {
		return args, "", nil
	}
	port, err := framework.FreePort()
	if err != nil {
		return nil, "", err
	}
	profileAddr = fmt.Sprintf("127.0.0.1:%d", port)
	return append(args, "--profiling-address="+profileAddr), profileAddr, nil
}

// Parallel calls f(i) for every i in [0, n) from workers goroutines, and returns the first
// error; a goroutine stops at its first error, the others go on.
func Parallel(n, workers int, f func(i int) error) error {
	var next atomic.Int64
	var first error
	var once sync.Once
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				if err := f(i); err != nil {
					once.Do(func() { first = err })
					return
				}
			}
		})
	}
	wg.Wait()
	return first
}

// AddGPUNodes creates the nodes names, Ready, each with cards cards of units GiB published as
// the share-plugin does (framework.GPUNode), workers at a time.
func AddGPUNodes(ctx context.Context, c *framework.Cluster, names []string, cards int, units int64, workers int) error {
	return Parallel(len(names), workers, func(i int) error {
		node, alloc, err := framework.GPUNode(names[i], cards, units)
		if err != nil {
			return err
		}
		return c.AddReadyNode(ctx, node, alloc)
	})
}

// WaitCached waits until ext's cache (its inspect answer) holds n nodes; what names the wait
// in its error.
func WaitCached(ctx context.Context, ext *framework.Extender, what string, n int) error {
	return framework.WaitFor(ctx, 250*time.Millisecond, what, func() (bool, error) {
		var inv struct {
			Nodes []json.RawMessage `json:"nodes"`
		}
		err := ext.GetJSON(ctx, framework.ExtenderPrefix+"/inspect", &inv)
		return err == nil && len(inv.Nodes) == n, err
	})
}
