package placement

import "hash/fnv"

// TieOrder is node's place, for the pod namespace/name, in the order that breaks ties between
// nodes a policy rates equally (lower first): a hash of both names. It is the same in every
// extender replica, after restarts and in the simulator (--tie-order=extender), unrelated to
// node size or age, and different for each pod, so that the pods of a burst, which the extender
// rates against the same state before any of them is bound, do not all pick the same node.
// Smarter orders (fullest or smallest node first) placed no better on the openb traces than
// this arbitrary one (docs/placement.md).
func TieOrder(namespace, name, node string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(namespace))
	_, _ = h.Write([]byte{'/'})
	_, _ = h.Write([]byte(name))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write([]byte(node))
	return h.Sum64()
}
