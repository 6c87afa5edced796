// Package scheduler holds the extender's decisions: which nodes a pod fits (filter), how good
// each is (prioritize, through a Policy), which GPU(s) it gets and how it is bound (bind), which
// victims free enough memory (preempt), and the HTTP handlers kube-scheduler calls.
package scheduler
