// Package scheduler is the extender kube-scheduler calls: its verbs (filter, prioritize, bind
// and preempt), each declared once in verbTable and placing the pod through a
// placement.Decision over its view of the cache (Extender.nodeView), and the routes that serve
// them (Handler). Three packages beside it hold what the verbs use and must not import it:
// server (serving and HA: TLS, the body budget, readiness, leader election, forwarding to the
// leader), fence (the leader's fenced writes to the API server) and preempt (GPU preemption:
// planning, holds, evictions and their events).
package scheduler
