package fake

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sfake "k8s.io/client-go/kubernetes/fake"
)

func TestClientPodsAndKubelet(t *testing.T) {
	pod := func(name, node string) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
			Spec: v1.PodSpec{NodeName: node, Containers: []v1.Container{{Name: "c"}}}}
	}
	client := k8sfake.NewClientset(pod("a", "n1"), pod("b", "n2"))
	got, err := ClientPods{Client: client, Node: "n1"}.NodePods(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Name != "a" {
		t.Fatalf("NodePods = %v, want only pod a", got)
	}
	var k Kubelet
	k.AddPod(pod("a", "n1"))
	k.SetDevices(pod("a", "n1"), "c", "r", []string{"x"})
	list, _ := k.List(context.Background())
	if diff := cmp.Diff([]string{"x"}, list[0].Containers[0].Devices[0].DeviceIds); diff != "" {
		t.Errorf("devices (-want,+got):\n%s", diff)
	}
}
