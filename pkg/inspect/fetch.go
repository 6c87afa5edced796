package inspect

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"

	"github.com/gpushare/gpushare/pkg/cache/feed"
)

// pageSize bounds each list call of nodes, so a big cluster is read in chunks (pods are read
// cache.PodPageSize a page).
const pageSize = 500

// activePods selects the pods that can hold GPU memory: bound to a node and not terminal.
// Terminating pods are kept: they hold their memory until they are gone.
const activePods = "spec.nodeName!=," + nonTerminal

// nonTerminal selects pods that are neither Succeeded nor Failed.
const nonTerminal = "status.phase!=Succeeded,status.phase!=Failed"

// Fetch reads what the report needs. Without node names it lists all nodes and, in one paged
// list across namespaces, every bound non-terminal pod. With node names it gets each node and
// lists only the pods with spec.nodeName equal to it, so inspecting one node of a big cluster
// never lists every pod.
func Fetch(ctx context.Context, client kubernetes.Interface, nodeNames []string) ([]v1.Node, []v1.Pod, error) {
	if len(nodeNames) == 0 {
		return fetchAll(ctx, client)
	}
	return fetchNamed(ctx, client, nodeNames)
}

func fetchAll(ctx context.Context, client kubernetes.Interface) ([]v1.Node, []v1.Pod, error) {
	nodes, err := listNodes(ctx, client)
	if err != nil {
		return nil, nil, err
	}
	pods, err := listPods(ctx, client, activePods, "in all namespaces")
	if err != nil {
		return nil, nil, err
	}
	return nodes, pods, nil
}

func fetchNamed(ctx context.Context, client kubernetes.Interface, nodeNames []string) ([]v1.Node, []v1.Pod, error) {
	var nodes []v1.Node
	var pods []v1.Pod
	for _, name := range nodeNames {
		node, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil, nil, fmt.Errorf("%w: node %q not found", ErrUnknownNode, name)
		}
		if err != nil {
			return nil, nil, explainAPIError(err, "get", "nodes", fmt.Sprintf("(node %q)", name))
		}
		nodes = append(nodes, *node)
		sel := "spec.nodeName=" + fields.EscapeValue(name) + "," + nonTerminal
		more, err := listPods(ctx, client, sel, fmt.Sprintf("in all namespaces (pods of node %q)", name))
		if err != nil {
			return nil, nil, err
		}
		pods = append(pods, more...)
	}
	return nodes, pods, nil
}

func listNodes(ctx context.Context, client kubernetes.Interface) ([]v1.Node, error) {
	var out []v1.Node
	opts := metav1.ListOptions{Limit: pageSize}
	for {
		list, err := client.CoreV1().Nodes().List(ctx, opts)
		if err != nil {
			return nil, explainAPIError(err, "list", "nodes", "at cluster scope")
		}
		out = append(out, list.Items...)
		if opts.Continue = list.Continue; opts.Continue == "" {
			return out, nil
		}
	}
}

func listPods(ctx context.Context, client kubernetes.Interface, selector, scope string) ([]v1.Pod, error) {
	var out []v1.Pod
	if _, err := feed.EachPodPage(ctx, client.CoreV1().Pods(metav1.NamespaceAll), metav1.ListOptions{FieldSelector: selector}, func(pods []v1.Pod) error {
		out = append(out, pods...)
		return nil
	}); err != nil {
		return nil, explainAPIError(err, "list", "pods", scope)
	}
	return out, nil
}
