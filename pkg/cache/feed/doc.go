// Package feed keeps a cache.Cache equal to the API server's truth: the node informer's
// handlers (AddNodeEventHandlers), the pod feed that lists page by page and watches without a
// second copy of the pods (PodFeed), the transform that trims what the cache never reads
// (Trimmer), and paged lists for the audit and the inspect view (EachPodPage, EachNodePage).
// It is the only part of the cache's side that depends on client-go, so that pkg/cache and
// what builds on it alone (the simulator) do not.
package feed
