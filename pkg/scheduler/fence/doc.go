// Package fence is how the extender writes to the API server while it leads: every Binding and
// pod patch carries the fence token of the term this replica leads in (contract.AnnotationFence)
// and goes with that term's deadline. A replica that does not lead now sends nothing
// (ErrNotLeader), a write still waiting in client-go's rate limiter when the term ends is dropped
// unsent, and the API server refuses a token that is no longer the Lease's (Policy,
// config/admission/extender-fence.yaml). Package scheduler binds through it and package preempt
// writes its holds and marks its victims through it. It must not import either.
package fence
