package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/test/e2e/framework"
)

// TestSeedStatefulSet is the seed's scenario: a StatefulSet of 2 replicas asking 4 GiB each
// shares one 16 GiB card; a 14 GiB pod takes the other card; a 9 GiB pod, which fits the node's
// total (kube-scheduler lets it through) but no single card, stays Pending with the extender's
// reason in its events.
func TestSeedStatefulSet(t *testing.T) {
	e := newEnv(t)
	cards := map[string][]contract.GPU{"gpu-node-1": framework.Cards("gpu-node-1", "Tesla T4", 16, 2)}
	e.nodes(cards)

	replicas := int32(2)
	labels := map[string]string{"app": "binpack"}
	tpl := v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: gpuPodSpec(e.c.SchedulerName, 4)}
	ss := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "binpack", Namespace: "default"},
		Spec: appsv1.StatefulSetSpec{
			Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: tpl,
			PodManagementPolicy: appsv1.ParallelPodManagement,
		},
	}
	if _, err := e.c.Client.AppsV1().StatefulSets("default").Create(e.ctx, ss, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p0, p1 := e.waitBound("binpack-0", time.Minute), e.waitBound("binpack-1", time.Minute)
	idx0, idx1 := p0.Annotations[contract.AnnotationIndex], p1.Annotations[contract.AnnotationIndex]
	if idx0 == "" || idx0 != idx1 {
		t.Fatalf("replicas on GPU %q and %q, want both on one card", idx0, idx1)
	}
	t.Logf("both replicas on %s GPU%s", p0.Spec.NodeName, idx0)

	e.create(e.gpuPod("big", 14))
	big := e.waitBound("big", time.Minute)
	if got := big.Annotations[contract.AnnotationIndex]; got == idx0 || got == "" {
		t.Fatalf("14 GiB pod on GPU %q, want the other card (replicas are on GPU%s)", got, idx0)
	}

	e.create(e.gpuPod("no-card-fits", 9))
	var msg string
	err := poll(e.ctx, time.Minute, func() (bool, error) {
		for _, line := range strings.Split(e.events("no-card-fits"), "\n") {
			if strings.Contains(line, "FailedScheduling") {
				msg = line
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no FailedScheduling event for the 9 GiB pod: %v", err)
	}
	t.Logf("9 GiB pod: %s", msg)
	if strings.Contains(msg, "Insufficient") || !strings.Contains(msg, "GPU memory: no GPU has 9 GiB free") {
		t.Fatalf("want the extender's reason, summarised over the nodes, got: %s", msg)
	}
	pod, err := e.c.Client.CoreV1().Pods("default").Get(e.ctx, "no-card-fits", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pod.Spec.NodeName != "" {
		t.Fatalf("9 GiB pod bound to %s; no card has 9 GiB free", pod.Spec.NodeName)
	}
	e.checkConsistent(cards)
}

// TestPolicySteersNodes: with --policy=binpack every pod lands on the node already in use; with
// --policy=spread the pods alternate between the two nodes.
func TestPolicySteersNodes(t *testing.T) {
	for _, tc := range []struct {
		policy string
		// want is the number of pods per node, sorted descending
		want [2]int
	}{
		{policy: "binpack", want: [2]int{6, 0}},
		{policy: "spread", want: [2]int{3, 3}},
	} {
		t.Run(tc.policy, func(t *testing.T) {
			e := newEnv(t, "--policy="+tc.policy)
			cards := map[string][]contract.GPU{
				"node-a": framework.Cards("node-a", "Tesla T4", 16, 2),
				"node-b": framework.Cards("node-b", "Tesla T4", 16, 2),
			}
			e.nodes(cards)
			perNode := map[string]int{}
			for i := range 6 {
				name := fmt.Sprintf("p%d", i)
				e.create(e.gpuPod(name, 4))
				perNode[e.waitBound(name, time.Minute).Spec.NodeName]++
			}
			got := [2]int{perNode["node-a"], perNode["node-b"]}
			if got[0] < got[1] {
				got[0], got[1] = got[1], got[0]
			}
			if got != tc.want {
				t.Fatalf("pods per node %v, want %v", perNode, tc.want)
			}
			e.checkConsistent(cards)
		})
	}
}
