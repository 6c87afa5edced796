package cache

import (
	"fmt"
	"sort"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/placement"
)

// AuditReport is what Audit found. Both lists are sorted; empty lists mean the invariants hold.
type AuditReport struct {
	// Overcommitted lists every card whose pods, as the API server places them, hold more than
	// the card has ("node GPU<index>: 20 of 16 units").
	Overcommitted []string `json:"overcommitted"`
	// Differences lists every way the cache differs from the API server's truth: nodes, their
	// cards (capacity, model, health, units used), pending units, and pods with their state and
	// placement.
	Differences []string `json:"differences"`
}

// OK reports whether no card is over capacity and the cache equals the truth.
func (r *AuditReport) OK() bool { return len(r.Overcommitted) == 0 && len(r.Differences) == 0 }

// Audit checks the cache against the API server's truth, its nodes and pods: the cache is a
// pure function of them, so a cache built from them afresh is the truth it must equal. A pod
// the cache holds Assumed (a bind under way or being settled) shows as a difference: audit a
// quiet cluster.
func Audit(c Cache, nodes []v1.Node, pods []v1.Pod, names contract.Names) AuditReport {
	t := NewAuditTruth(names)
	for i := range nodes {
		t.AddNode(&nodes[i])
	}
	for i := range pods {
		t.AddPod(&pods[i])
	}
	return t.Compare(c)
}

// AuditTruth is the API server's truth for Audit, built as the nodes and pods are listed (page
// by page: it keeps what a cache keeps, not the objects). Its nodes' snapshots are built once,
// when compared, not once per pod listed.
type AuditTruth struct{ truth *cacheImpl }

// NewAuditTruth returns an empty truth.
func NewAuditTruth(names contract.Names) *AuditTruth {
	return &AuditTruth{truth: newDeferred(names, klog.Background().V(10))}
}

// AddNode adds a node as the API server has it.
func (t *AuditTruth) AddNode(n *v1.Node) { t.truth.SetNode(n) }

// AddPod adds a pod as the API server has it.
func (t *AuditTruth) AddPod(p *v1.Pod) { t.truth.SetPod(p) }

// Target is the cache the truth is built in, for a feed that fills it from other objects (in
// DRA mode, feed.DRAFeed from the ResourceSlices and ResourceClaims).
func (t *AuditTruth) Target() Cache { return t.truth }

// Compare checks c against the truth, as Audit does.
func (t *AuditTruth) Compare(c Cache) AuditReport {
	t.truth.settle()
	want, got := byName(t.truth.Nodes()), byName(c.Nodes())
	var r AuditReport
	for name, n := range want {
		r.Overcommitted = append(r.Overcommitted, overcommitted(n)...)
		if g, ok := got[name]; ok {
			r.Differences = append(r.Differences, nodeDiff(n, g)...)
		} else {
			r.Differences = append(r.Differences, fmt.Sprintf("node %s: in the API, not in the cache", name))
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			r.Differences = append(r.Differences, fmt.Sprintf("node %s: in the cache, not in the API", name))
		}
	}
	sort.Strings(r.Overcommitted)
	sort.Strings(r.Differences)
	return r
}

// OvercommittedCards counts the cards over capacity in the snapshots.
func OvercommittedCards(nodes []*placement.NodeInfo) int {
	n := 0
	for _, node := range nodes {
		n += len(overcommitted(node))
	}
	return n
}

func byName(nodes []*placement.NodeInfo) map[string]*placement.NodeInfo {
	out := make(map[string]*placement.NodeInfo, len(nodes))
	for _, n := range nodes {
		out[n.Name] = n
	}
	return out
}

// overcommitted describes the cards of n whose pods hold more than the card has.
func overcommitted(n *placement.NodeInfo) []string {
	var out []string
	for _, g := range n.GPUs {
		if g.Used > g.Capacity {
			out = append(out, fmt.Sprintf("%s GPU%d: %d of %d units", n.Name, g.Index, g.Used, g.Capacity))
		}
	}
	return out
}

// nodeDiff describes how the cache's snapshot got of a node differs from the truth want.
func nodeDiff(want, got *placement.NodeInfo) []string {
	var out []string
	add := func(format string, args ...any) { out = append(out, want.Name+": "+fmt.Sprintf(format, args...)) }
	if len(want.GPUs) != len(got.GPUs) {
		add("%d GPUs in the API, %d in the cache", len(want.GPUs), len(got.GPUs))
	}
	for i := range min(len(want.GPUs), len(got.GPUs)) {
		if w, g := want.GPUs[i], got.GPUs[i]; w != g {
			add("GPU%d is %+v in the API, %+v in the cache", w.Index, w, g)
		}
	}
	if want.PendingUnits != got.PendingUnits {
		add("%d pending units in the API, %d in the cache", want.PendingUnits, got.PendingUnits)
	}
	// Both snapshots list their pods sorted by namespace/name: walk them side by side.
	w, g := want.Pods, got.Pods
	for len(w) > 0 || len(g) > 0 {
		switch order := comparePods(w, g); {
		case order < 0:
			add("pod %s: bound in the API, not in the cache", w[0].Key())
			w = w[1:]
		case order > 0:
			add("pod %s: %s in the cache with %v, not bound there in the API", g[0].Key(), g[0].State, g[0].Allocation)
			g = g[1:]
		default:
			if a, b := &w[0], &g[0]; a.UID != b.UID || a.State != b.State || a.Units != b.Units || !a.Allocation.Equal(b.Allocation) {
				add("pod %s: %s %s %v in the API, %s %s %v in the cache", a.Key(), a.UID, a.State, a.Allocation, b.UID, b.State, b.Allocation)
			}
			w, g = w[1:], g[1:]
		}
	}
	return out
}

// comparePods orders the heads of two pod lists sorted by key, an empty list last.
func comparePods(w, g []placement.PodInfo) int {
	switch {
	case len(g) == 0:
		return -1
	case len(w) == 0:
		return 1
	}
	return placement.CompareKeys(&w[0], &g[0])
}
