package feed

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/gpushare/gpushare/pkg/cache"
	"github.com/gpushare/gpushare/pkg/contract"
)

// AddNodeEventHandlers feeds c from the factory's node informer, which keeps nodes trimmed by
// Trimmer(names), and returns the function that reports whether c has received every node of
// the informer's first list (the handler's registration, not the informer's store: its
// handler may still be handing nodes to c when the store is full). Pods come through a
// PodFeed. Call it before factory.Start.
func AddNodeEventHandlers(c cache.Cache, factory informers.SharedInformerFactory, names contract.Names) (toolscache.InformerSynced, error) {
	nodes := factory.Core().V1().Nodes().Informer()
	if err := nodes.SetTransform(Trimmer(names)); err != nil {
		return nil, err
	}
	reg, err := nodes.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
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
	return reg.HasSynced, nil
}

func setNode(c cache.Cache, obj any) {
	if n, ok := obj.(*v1.Node); ok {
		c.SetNode(n)
	}
}

func untombstone(obj any) any {
	if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		return t.Obj
	}
	return obj
}
