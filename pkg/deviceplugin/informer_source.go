package deviceplugin

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// InformerPodSource is a PodSource backed by a pod informer limited to one node.
type InformerPodSource struct {
	factory informers.SharedInformerFactory
	lister  corelisters.PodLister
	synced  cache.InformerSynced
	node    string
}

var (
	_ PodSource = (*InformerPodSource)(nil)
	_ Runner    = (*InformerPodSource)(nil)
)

// NewInformerPodSource watches the pods bound to node.
func NewInformerPodSource(client kubernetes.Interface, node string) *InformerPodSource {
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", node).String()
		}))
	pods := factory.Core().V1().Pods()
	return &InformerPodSource{factory: factory, lister: pods.Lister(), synced: pods.Informer().HasSynced, node: node}
}

// Run starts the informer and waits for its first sync.
func (s *InformerPodSource) Run(ctx context.Context) error {
	s.factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), s.synced) {
		return fmt.Errorf("pod informer for node %s: %w", s.node, ctx.Err())
	}
	return nil
}

// NodePods lists the cached pods of the node.
func (s *InformerPodSource) NodePods(context.Context) ([]*v1.Pod, error) {
	all, err := s.lister.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("list pods: %w", err)
	}
	out := all[:0:0]
	for _, p := range all {
		if p.Spec.NodeName == s.node { // the fake clientset ignores field selectors
			out = append(out, p)
		}
	}
	return out, nil
}
