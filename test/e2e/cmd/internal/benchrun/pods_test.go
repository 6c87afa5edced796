package benchrun

import (
	"context"
	"errors"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// TestWatchPods checks that WatchPods reports the pods of its namespace that exist and those
// added or updated later, and no other namespace's.
func TestWatchPods(t *testing.T) {
	pod := func(ns, name, node string) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1.PodSpec{NodeName: node}}
	}
	client := fake.NewClientset(pod("bench", "before", ""), pod("other", "elsewhere", ""))
	seen := make(chan string, 10)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := WatchPods(ctx, client, "bench", func(p *v1.Pod) { seen <- p.Name + "@" + p.Spec.NodeName }); err != nil {
		t.Fatal(err)
	}
	pods := client.CoreV1().Pods("bench")
	if _, err := pods.Create(ctx, pod("bench", "after", ""), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := pods.Update(ctx, pod("bench", "after", "node-1"), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"before@", "after@", "after@node-1"} {
		select {
		case got := <-seen:
			if got != want {
				t.Errorf("observed %q, want %q", got, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%q not observed", want)
		}
	}
}

func TestWatchPodsCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := WatchPods(ctx, fake.NewClientset(), "bench", func(*v1.Pod) {})
	if !errors.Is(err, errNotSynced) {
		t.Errorf("WatchPods = %v, want %v", err, errNotSynced)
	}
}
