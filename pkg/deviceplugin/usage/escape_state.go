package usage

// escapeState is what the sampler remembers of escapes between readings; Sampler.mu guards it.
type escapeState struct {
	// handled holds, for each escape of the last reading, its processes and whether the action
	// on each is done (false: it failed, and is tried again at the next reading).
	handled map[escapeKey]map[uint32]bool
	// counts are the escapes reported, by container and kind (escapeKey without a card).
	counts map[escapeKey]*escapeCount
	// actions are the processes acted on, by action and result.
	actions map[actionKey]float64
	// checkErrors counts the processes whose maps could not be read.
	checkErrors float64
}

// escapeCount is gpushare_container_limit_escapes_total of one container and kind.
type escapeCount struct {
	namespace, pod, container string
	n                         float64
}

// actionKey labels gpushare_limit_escape_actions_total.
type actionKey struct {
	action, result string
}

func newEscapeState() escapeState {
	return escapeState{handled: map[escapeKey]map[uint32]bool{}, counts: map[escapeKey]*escapeCount{},
		actions: map[actionKey]float64{}}
}

// beginEscapes marks the escapes with a process not seen escaping before as fresh, and returns
// the processes to act on: those not dealt with yet.
func (s *Sampler) beginEscapes(escapes []escape) []gpuProcess {
	s.mu.Lock()
	defer s.mu.Unlock()
	var pending []gpuProcess
	for i := range escapes {
		e := &escapes[i]
		prev := s.escapes.handled[e.key]
		for _, p := range e.offenders {
			done, seen := prev[p.pid]
			e.fresh = e.fresh || !seen
			if !done {
				pending = append(pending, p)
			}
		}
	}
	return pending
}

// endEscapes records what was done (results, by PID), counts the fresh escapes and the actions,
// and forgets the escapes gone from this reading (unless it is partial) and the counts of pods
// gone from the node.
func (s *Sampler) endEscapes(escapes []escape, results map[uint32]error, idx podIndex, partial bool) {
	action := s.cfg.Escapes.Action
	s.mu.Lock()
	defer s.mu.Unlock()
	st := &s.escapes
	next := make(map[escapeKey]map[uint32]bool, len(escapes))
	for i := range escapes {
		e := &escapes[i]
		prev, procs := st.handled[e.key], map[uint32]bool{}
		for _, p := range e.offenders {
			err, acted := results[p.pid]
			procs[p.pid] = prev[p.pid] || !acted || resultOf(err) != resultFailed
		}
		next[e.key] = procs
		if e.fresh {
			ck := escapeKey{containerKey: e.key.containerKey, kind: e.key.kind}
			if st.counts[ck] == nil {
				st.counts[ck] = &escapeCount{namespace: e.pod.Namespace, pod: e.pod.Name, container: e.key.container}
			}
			st.counts[ck].n++
		}
	}
	for _, err := range results {
		st.actions[actionKey{action: action, result: resultOf(err)}]++
	}
	if partial {
		for k, v := range st.handled {
			if _, ok := next[k]; !ok {
				next[k] = v
			}
		}
	}
	st.handled = next
	for k := range st.counts {
		if _, ok := idx.byUID[k.pod]; !ok && !partial {
			delete(st.counts, k)
		}
	}
}
