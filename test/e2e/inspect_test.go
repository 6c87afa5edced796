package e2e

import (
	"fmt"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/gpushare/gpushare/pkg/contract"
)

// inspectJSON is the part of GET /gpushare-scheduler/inspect the tests compare; it mirrors the
// extender's wire format, not its Go types, so a format change breaks this test.
type inspectJSON struct {
	Unit  string `json:"unit"`
	Nodes []struct {
		Name string `json:"name"`
		GPUs []struct {
			Index    int   `json:"index"`
			Capacity int64 `json:"capacity"`
			Used     int64 `json:"used"`
		} `json:"gpus"`
		Pods []struct {
			Namespace  string              `json:"namespace"`
			Name       string              `json:"name"`
			Allocation contract.Allocation `json:"allocation"`
		} `json:"pods"`
	} `json:"nodes"`
}

func (e *env) inspect() (inspectJSON, error) {
	var out inspectJSON
	err := e.ext.GetJSON(e.ctx, "/gpushare-scheduler/inspect", &out)
	return out, err
}

// extenderUsage is the extender's per-card used units, and its per-pod placements rendered as
// "node ns/name allocation" lines.
func (e *env) extenderUsage() (usage, []string, error) {
	in, err := e.inspect()
	if err != nil {
		return nil, nil, err
	}
	u := usage{}
	var pods []string
	for _, n := range in.Nodes {
		for _, g := range n.GPUs {
			if g.Used != 0 {
				u.add(n.Name, g.Index, g.Used)
			}
		}
		for _, p := range n.Pods {
			pods = append(pods, placementLine(n.Name, p.Namespace, p.Name, p.Allocation))
		}
	}
	sort.Strings(pods)
	return u, pods, nil
}

func placementLine(node, ns, name string, a contract.Allocation) string {
	var keys []string
	for c, gpus := range a {
		var parts []string
		for g, units := range gpus {
			parts = append(parts, fmt.Sprintf("GPU%d=%d", g, units))
		}
		sort.Strings(parts)
		keys = append(keys, c+":"+strings.Join(parts, ","))
	}
	sort.Strings(keys)
	return fmt.Sprintf("%s %s/%s %s", node, ns, name, strings.Join(keys, " "))
}

// apiPlacements renders the pods' annotated placements like extenderUsage does.
func apiPlacements(pods []v1.Pod) []string {
	names := contract.DefaultNames()
	var out []string
	for i := range pods {
		p := &pods[i]
		req, _ := contract.ParseRequest(p, &names)
		a, _, _ := contract.AllocationFromPod(p, &req)
		out = append(out, placementLine(p.Spec.NodeName, p.Namespace, p.Name, a))
	}
	sort.Strings(out)
	return out
}
