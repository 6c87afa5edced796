package placement

import "hash/fnv"

// TieOrder is a node's place in the fixed order that breaks ties between nodes a policy rates
// equally (lower first): a hash of its name, so that every extender replica, every restart and
// the simulator (with --tie-order=name) agree, and unrelated to node size or age. Smarter
// orders (fullest or smallest node first) placed no better on the openb traces than this
// arbitrary one (docs/placement.md).
func TieOrder(node string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(node))
	return h.Sum64()
}
