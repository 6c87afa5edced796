package e2e

import (
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/draconvert"
	"github.com/gpushare/gpushare/test/e2e/framework"
)

// draWebhookDenied starts kube-apiserver's message for a pod the DRA webhook
// (config/dra/webhook.yaml, webhook dra.gpushare.io) refused.
const draWebhookDenied = `admission webhook "dra.gpushare.io" denied the request: `

// refusedAtCreation (TestDRA/RefusedAtCreation): gpu-mem asks DRA mode cannot serve are
// refused when the pod is created, 422 Invalid with the webhook's message: 5 units over two
// cards (no even split), a device-plugin mode placement annotation (kube-scheduler's
// allocator chooses the card in DRA mode), spec.nodeName (the claim would never be allocated).
// No pod and no claim template is left behind.
func (d *draNode) refusedAtCreation(t *testing.T) {
	e := d.e.forSubtest(t)
	names := e.names()
	pinned := e.draPod("pinned", draPodUnits, nil)
	pinned.Spec.NodeName, pinned.Spec.NodeSelector = framework.RealNodeName, nil
	cases := []struct {
		name string
		pod  *v1.Pod
		says []string
	}{
		{"UnevenSplit", e.draPod("uneven", 5, map[string]string{names.GPUCountAnnotation: "2"}),
			[]string{`asks 5 units of ` + contract.DefaultResourceName, "do not split evenly over 2 GPUs"}},
		{"PlacementAnnotation", e.draPod("placed", draPodUnits, map[string]string{contract.AnnotationIndex: "0"}),
			[]string{"annotation " + contract.AnnotationIndex, "in DRA mode kube-scheduler chooses the card", draconvert.ModeLabel + "=" + draconvert.ModeDevicePlugin}},
		{"NodeName", pinned, []string{`spec.nodeName "` + framework.RealNodeName + `"`, "nodeSelector"}},
	}
	before := e.claimTemplates()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := e.forSubtest(t)
			_, err := e.c.Client.CoreV1().Pods("default").Create(e.ctx, tc.pod, metav1.CreateOptions{})
			if err == nil {
				_ = e.c.Client.CoreV1().Pods("default").Delete(e.ctx, tc.pod.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
				t.Fatalf("pod %s admitted, want it refused saying %q", tc.pod.Name, tc.says)
			}
			t.Logf("pod %s refused: %v", tc.pod.Name, err)
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), draWebhookDenied) {
				t.Errorf("refusal %v: want 422 Invalid, %q", err, draWebhookDenied)
			}
			for _, s := range tc.says {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("refusal %q does not say %q", err, s)
				}
			}
			if _, err := e.c.Client.CoreV1().Pods("default").Get(e.ctx, tc.pod.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("pod %s after its refusal: %v, want NotFound", tc.pod.Name, err)
			}
		})
	}
	if after := e.claimTemplates(); !slices.Equal(before, after) {
		t.Errorf("claim templates %v before the refused pods, %v after: a refused ask made one", before, after)
	}
	d.checkInvariants(t, e, map[string]int64{})
}

// claimTemplates lists the names of the default namespace's ResourceClaimTemplates, sorted.
func (e *env) claimTemplates() []string {
	e.t.Helper()
	list, err := e.c.Client.ResourceV1().ResourceClaimTemplates("default").List(e.ctx, metav1.ListOptions{})
	if err != nil {
		e.t.Fatalf("list ResourceClaimTemplates: %v", err)
	}
	var out []string
	for _, tmpl := range list.Items {
		out = append(out, tmpl.Name)
	}
	slices.Sort(out)
	return out
}
