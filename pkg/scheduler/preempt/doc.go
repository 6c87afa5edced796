// Package preempt is the extender's GPU preemption (docs/design.md, "Preemption"):
// planning which pods to evict for a pod that fits no card, in the background of a filter or
// for the preempt verb; the holds that keep the freed memory for the preemptor (holds.go,
// signed: hold_mac.go); the evictions (evict.go); and the events that tell users
// (events.go). It places through the view of the cache the extender's verbs place through
// (View), and writes through the leader's fence (package fence). It must not import package
// scheduler: the extender holds a Preemptor and calls it, never the other way.
//
// kube-scheduler's own preemption cannot free a card: its dry run sees gpu-mem only as a node
// total and does not call extenders, so on a node whose total fits but no card does it finds
// no victim at all, and elsewhere it keeps victims while the node total fits, which need not
// free any single card. The extender therefore preempts for a pod asking gpu-mem itself:
//   - from filter, when the pod fits none of the candidate nodes kube-scheduler sent (their
//     CPU, memory and the gpu-mem total fit; no card does), and
//   - from the preempt verb, on the nodes kube-scheduler's dry run proposes (where the gpu-mem
//     total did not fit either).
//
// It picks the card and victims that cost least over those nodes (placement.PlanPreemption),
// checks every eviction first (a dry run through the Eviction API: PodDisruptionBudgets), writes
// the hold on the preemptor (holds.go), then removes the victims with their own grace periods:
// each is marked gpushare.io/preempted-by "<preemptor namespace>/<name>/<priority>" (under the
// fence) and deleted, as kube-scheduler's own preemption deletes its victims (a DELETE with a
// UID precondition, not an eviction). That mark is what lets the API server bound what the
// extender's account may remove (config/admission/extender-pods.yaml): only pods that ask
// gpu-mem, below ProtectedPriority, marked with a priority above their own; a real eviction is
// refused. The preempt verb then answers no GPU victims for kube-scheduler to delete: the pods
// it would add for other resources (CPU, memory) are passed back on the node the extender
// chose, or nothing.
package preempt
