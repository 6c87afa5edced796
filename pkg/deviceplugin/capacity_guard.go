package deviceplugin

import (
	"context"
	"errors"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
)

// The plugin's second line of defence against an over-committed card: whatever the scheduler
// decided, an Allocate that would make the pods admitted on a card hold more than the card has
// fails, loudly, for that one pod. The count is rebuilt from live state on every Allocate (the
// pods on the node, the plugin's handouts, the kubelet's PodResources and the ASSIGNED
// annotation), so it needs nothing restored after a plugin restart. The check is the admission
// ledger's (tracker.overCapacityLocked in tracker_admit.go), taken in the same critical section
// that records the handout, so two Allocates cannot both fit into the last free units.

// ErrOverCapacity is wrapped when admitting the pod would put a card over its capacity.
var ErrOverCapacity = errors.New("admitting the pod would put a GPU over capacity")

// eventTimeout bounds the Event that tells a pod why its Allocate failed.
const eventTimeout = 5 * time.Second

// warnPod records a Warning Event on pod, in the background and with a timeout of its own.
func (p *Plugin) warnPod(ctx context.Context, pod *v1.Pod, reason, message string) {
	logger := klog.FromContext(p.baseCtx(ctx))
	go func() {
		ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), eventTimeout) // outlives the Allocate
		defer cancel()
		if err := WarnPod(ectx, p.client, p.cfg.nodeName, pod, reason, message); err != nil {
			logger.Info("Could not record an Event on the pod", "pod", klog.KObj(pod), "reason", reason, "err", err)
		}
	}()
}

// WarnPod records a Warning Event on pod from the share-plugin of node.
func WarnPod(ctx context.Context, client kubernetes.Interface, node string, pod *v1.Pod, reason, message string) error {
	now := metav1.Now()
	ev := &v1.Event{
		ObjectMeta:     metav1.ObjectMeta{GenerateName: pod.Name + ".", Namespace: pod.Namespace},
		InvolvedObject: v1.ObjectReference{Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID, APIVersion: "v1"},
		Reason:         reason, Message: message, Type: v1.EventTypeWarning,
		Source:         v1.EventSource{Component: "gpushare-share-plugin", Host: node},
		FirstTimestamp: now, LastTimestamp: now, Count: 1,
	}
	if _, err := client.CoreV1().Events(pod.Namespace).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("event %s on pod %s/%s: %w", reason, pod.Namespace, pod.Name, err)
	}
	return nil
}
