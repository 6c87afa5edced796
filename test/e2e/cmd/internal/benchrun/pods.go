package benchrun

import (
	"context"
	"errors"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
)

// PauseImage is the image of the benchmarks' pods: nothing runs them, the nodes are fake.
const PauseImage = "registry.k8s.io/pause:3.10"

// errNotSynced says that the pod informer stopped before it had listed the pods.
var errNotSynced = errors.New("pod informer did not sync")

// WatchPods calls observe with every pod of namespace that the informer adds or updates, until
// ctx ends. It returns once the informer has listed the pods, and an error if ctx ends first.
func WatchPods(ctx context.Context, client kubernetes.Interface, namespace string, observe func(*v1.Pod)) error {
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(namespace))
	inf := factory.Core().V1().Pods().Informer()
	handle := func(obj any) {
		if pod, ok := obj.(*v1.Pod); ok {
			observe(pod)
		}
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    handle,
		UpdateFunc: func(_, obj any) { handle(obj) },
	}); err != nil {
		return err
	}
	factory.Start(ctx.Done())
	if !toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return errNotSynced
	}
	return nil
}
