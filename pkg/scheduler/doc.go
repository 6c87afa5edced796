// Package scheduler is the extender kube-scheduler calls: its verbs (filter, prioritize, bind
// and preempt), each declared once in verbTable and placing the pod through a
// placement.Decision over the cache's snapshots, and the routes that serve them (Handler).
// Serving and HA (TLS, the body budget, readiness, leader election, forwarding to the leader)
// are package server's.
package scheduler
