package cache

// idPool hands out node IDs (placement.NodeInfo.ID): the smallest numbers not in use, so that
// they stay dense and per-node state indexed by them stays small. Not safe for concurrent use
// (the cache's lock guards it).
type idPool struct {
	next int   // every ID below next has been handed out at least once
	free []int // IDs given back, to hand out again
}

// take returns an ID not in use.
func (p *idPool) take() int {
	if n := len(p.free); n > 0 {
		id := p.free[n-1]
		p.free = p.free[:n-1]
		return id
	}
	p.next++
	return p.next - 1
}

// give returns id to the pool.
func (p *idPool) give(id int) { p.free = append(p.free, id) }
