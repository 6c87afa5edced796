package cache

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/gpushare/gpushare/pkg/contract"
)

// AddEventHandlers feeds c from the factory's node and pod informers, which keep objects
// trimmed by Trimmer(names), and returns the functions that report whether c has received every
// object of the informers' first lists: an informer's own HasSynced turns true when its store
// is full, while its handlers may still be handing tens of thousands of pods to c. Call it
// before factory.Start.
func AddEventHandlers(c Cache, factory informers.SharedInformerFactory, names contract.Names) ([]toolscache.InformerSynced, error) {
	nodes := factory.Core().V1().Nodes().Informer()
	pods := factory.Core().V1().Pods().Informer()
	for _, inf := range []toolscache.SharedIndexInformer{nodes, pods} {
		if err := inf.SetTransform(Trimmer(names)); err != nil {
			return nil, err
		}
	}
	nodeReg, err := nodes.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { setNode(c, obj) },
		UpdateFunc: func(_, obj any) { setNode(c, obj) },
		DeleteFunc: func(obj any) {
			if n, ok := untombstone(obj).(*v1.Node); ok {
				c.RemoveNode(n.Name)
			}
		},
	})
	if err != nil {
		return nil, err
	}
	podReg, err := pods.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { setPod(c, obj) },
		UpdateFunc: func(_, obj any) { setPod(c, obj) },
		DeleteFunc: func(obj any) {
			if p, ok := untombstone(obj).(*v1.Pod); ok {
				c.RemovePod(p)
			}
		},
	})
	if err != nil {
		return nil, err
	}
	return []toolscache.InformerSynced{nodeReg.HasSynced, podReg.HasSynced}, nil
}

func setNode(c Cache, obj any) {
	if n, ok := obj.(*v1.Node); ok {
		c.SetNode(n)
	}
}

func setPod(c Cache, obj any) {
	if p, ok := obj.(*v1.Pod); ok {
		c.SetPod(p)
	}
}

func untombstone(obj any) any {
	if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		return t.Obj
	}
	return obj
}
