// Package server serves the extender over HTTP and keeps its replicas available: the HTTPS
// listener and its certificates (tls.go), the guards every verb sits behind (a verified client
// certificate, a synced cache, the body budget), the probes (readiness.go), leader election and
// its fence (election.go), a follower's forwarding to the leader and the shedding of its
// callers' connections (forward.go, conn_shed.go), the server's lifecycle (server.go) and
// profiling. It knows nothing of the verbs: package scheduler declares them, each once, and
// wraps each with what this package provides. It must not import package scheduler.
package server
