// Package deviceplugin is gpushare's kubelet device plugin: it advertises GPU memory as one
// fake device per unit (contract.Names.Resource), publishes the node's GPU inventory, and in
// Allocate hands every container the card(s) the extender chose for its pod.
//
// The design of Allocate (which pod is kubelet admitting?) is in docs/deviceplugin.md.
// NVML is reached only through the nvml subpackage.
//
// Allocate's state lives in one admission ledger, tracker (tracker.go, tracker_admit.go,
// parse_cache.go): the handouts (Allocate's answers), the refused pods and the parse cache,
// behind one mutex that only the ledger's methods take. Allocate (resolve) lists the pods and
// asks the kubelet, then calls tracker.admit, which picks the container and records the
// handout in one critical section; the reconciler (reconcile.go) works on tracker.snapshot and
// writes back with confirm and forgetSettled.
//
// Allocate's answer and the background correction must agree: Allocate may guess the wrong
// container, and verify.go and rebalance_placements.go then move the handout's placement onto
// the container that really got the devices. That is only right while the answer is a function
// of the placement and of what rebalance keeps equal when it trades (the container's units and
// kind); containerResponse says what depends on what. Change one side, change the other.
package deviceplugin
