package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/test/e2e/framework"
)

// Gang scheduling (KEP-4671) on kube-scheduler v1.37.1: the Workload API's PodGroup
// (scheduling.k8s.io/v1beta1, beta and off by default) and the GangScheduling plugin, both behind
// the GenericWorkload feature gate (beta, off by default in 1.37).
const (
	gangFeatureGates  = "GenericWorkload=true"
	gangRuntimeConfig = "scheduling.k8s.io/v1beta1=true"
)

// newGangEnv is newEnv with gang scheduling switched on in kube-apiserver and kube-scheduler.
func newGangEnv(t *testing.T) *env {
	t.Helper()
	e := newEnvWithOptions(t, func(o *framework.Options) {
		o.FeatureGates, o.RuntimeConfig = gangFeatureGates, gangRuntimeConfig
	})
	if err := e.c.StartScheduler(e.ext.Host()); err != nil {
		t.Fatal(err)
	}
	return e
}

// podGroup creates a gang PodGroup of minCount.
func (e *env) podGroup(name string, minCount int32) {
	e.t.Helper()
	pg := &schedulingv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: schedulingv1beta1.PodGroupSpec{SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{
			Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: minCount},
		}},
	}
	if _, err := e.c.Client.SchedulingV1beta1().PodGroups("default").Create(e.ctx, pg, metav1.CreateOptions{}); err != nil {
		e.t.Fatalf("create PodGroup %s: %v", name, err)
	}
}

// gangPods creates n pods of units each in PodGroup group, named group-0 ... group-(n-1), kept
// on node by a node selector.
func (e *env) gangPods(group, node string, n int, units int64) []string {
	e.t.Helper()
	names := make([]string, n)
	for i := range n {
		p := e.gpuPod(fmt.Sprintf("%s-%d", group, i), units)
		p.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: &group}
		p.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": node}
		e.create(p)
		names[i] = p.Name
	}
	return names
}

// gangState is one look at a group's pods: which are bound and which hold GPU memory by their
// placement annotations.
type gangState struct {
	bound, holding []string
}

func (g gangState) String() string {
	return fmt.Sprintf("bound %v, holding GPU memory %v", g.bound, g.holding)
}

func (e *env) gangState(names []string) (gangState, error) {
	var g gangState
	for _, n := range names {
		p, err := e.c.Client.CoreV1().Pods("default").Get(e.ctx, n, metav1.GetOptions{})
		if err != nil {
			return g, err
		}
		if p.Spec.NodeName != "" {
			g.bound = append(g.bound, n+"@"+p.Spec.NodeName)
		}
		if _, ok := p.Annotations[contract.AnnotationIndex]; ok {
			g.holding = append(g.holding, n)
		}
	}
	return g, nil
}

// gangWatch follows groups of pods: the most of each ever bound at once, and the last look.
type gangWatch struct {
	groups   map[string][]string
	maxBound map[string]int
	last     map[string]gangState
	prev     map[string]string
}

func newGangWatch(groups map[string][]string) *gangWatch {
	return &gangWatch{groups: groups, maxBound: map[string]int{}, last: map[string]gangState{}, prev: map[string]string{}}
}

// watch samples every group every 100 ms, logging each change, for at least min and until done
// holds or max has passed.
func (w *gangWatch) watch(e *env, minWait, maxWait time.Duration, done func(*gangWatch) bool) {
	e.t.Helper()
	t0 := time.Now()
	for {
		for name, pods := range w.groups {
			g, err := e.gangState(pods)
			if err != nil {
				e.t.Fatal(err)
			}
			if s := g.String(); s != w.prev[name] {
				e.t.Logf("%5.1f s: group %s: %s", time.Since(t0).Seconds(), name, s)
				w.prev[name] = s
			}
			w.maxBound[name] = max(w.maxBound[name], len(g.bound))
			w.last[name] = g
		}
		if el := time.Since(t0); (el >= minWait && done(w)) || el >= maxWait {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// gangEvents counts the FailedScheduling events of pod that name a gang (each with its count)
// and returns the latest message.
func (e *env) gangEvents(pod string) (n int, latest string) {
	e.t.Helper()
	list, err := e.c.Client.CoreV1().Events("default").List(e.ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + pod})
	if err != nil {
		e.t.Fatal(err)
	}
	var at time.Time
	for _, ev := range list.Items {
		if ev.Reason != "FailedScheduling" || !strings.Contains(ev.Message, "gang ") {
			continue
		}
		n += int(max(ev.Count, 1))
		if t := ev.EventTime.Time; t.After(at) || latest == "" {
			at, latest = t, ev.Message
		}
	}
	return n, latest
}

// TestGang: two gangs of four 8 GiB pods (PodGroup minCount 4). On gang-tight, three 12 GiB
// cards: kube-scheduler sees gpu-mem as the node's total, 36 GiB, where four 8 GiB pods fit, but
// the cards take one each, three in all. On gang-roomy, two 16 GiB cards take the four. All or
// nothing: the roomy gang binds whole; of the tight gang no pod is ever bound or holds GPU memory.
// Then the tight gang's minCount drops to 3: three of its pods bind together, the fourth stays
// pending. No card is over capacity, and the extender's cache agrees with the pods.
func TestGang(t *testing.T) {
	e := newGangEnv(t)
	cards := map[string][]contract.GPU{
		"gang-tight": framework.Cards("gang-tight", "Tesla T4", 12, 3),
		"gang-roomy": framework.Cards("gang-roomy", "Tesla T4", 16, 2),
	}
	e.nodes(cards)
	e.podGroup("tight", 4)
	e.podGroup("roomy", 4)
	w := newGangWatch(map[string][]string{
		"tight": e.gangPods("tight", "gang-tight", 4, 8),
		"roomy": e.gangPods("roomy", "gang-roomy", 4, 8),
	})
	// kube-scheduler retries the tight gang with its backoff (1 s doubling to 10 s): 30 s see
	// several rounds of binds refused together.
	w.watch(e, 30*time.Second, 90*time.Second, func(w *gangWatch) bool { return len(w.last["roomy"].bound) == 4 })
	for _, g := range []string{"roomy", "tight"} {
		t.Logf("group %s: at most %d of 4 pods bound at once; at the end %s", g, w.maxBound[g], w.last[g])
	}
	rounds, msg := e.gangEvents("tight-0")
	t.Logf("tight-0: %d FailedScheduling events naming the gang, the latest: %s", rounds, msg)
	if w.maxBound["roomy"] != 4 {
		t.Errorf("the roomy gang, which fits, did not bind whole: %s", w.last["roomy"])
	}
	if w.maxBound["tight"] != 0 || len(w.last["tight"].holding) != 0 {
		t.Errorf("all or nothing broken: %d of the tight gang's 4 pods were bound at once (%s)", w.maxBound["tight"], w.last["tight"])
	}
	if rounds == 0 {
		t.Errorf("the tight gang's pods have no FailedScheduling event naming the gang; events:\n%s", e.events("tight-0"))
	}
	e.checkConsistent(cards)

	// minCount 3: a quorum of three binds together; the fourth finds no card and stays pending.
	patch := []byte(`{"spec":{"schedulingPolicy":{"gang":{"minCount":3}}}}`)
	if _, err := e.c.Client.SchedulingV1beta1().PodGroups("default").Patch(e.ctx, "tight", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	w = newGangWatch(map[string][]string{"tight": w.groups["tight"]})
	w.watch(e, 10*time.Second, 90*time.Second, func(w *gangWatch) bool { return len(w.last["tight"].bound) >= 3 })
	t.Logf("group tight, minCount 3: at most %d of 4 pods bound; at the end %s", w.maxBound["tight"], w.last["tight"])
	if got := len(w.last["tight"].bound); got != 3 || len(w.last["tight"].holding) != 3 {
		t.Errorf("minCount 3: %s, want three pods bound with their cards and one pending", w.last["tight"])
	}
	e.checkConsistent(cards)
}
