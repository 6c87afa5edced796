// Package scheduler is the extender kube-scheduler calls: its verbs (filter, prioritize, bind
// and preempt, each placing the pod through a placement.Decision over the cache's snapshots),
// and its HTTP layer (Handler, Serve).
package scheduler
