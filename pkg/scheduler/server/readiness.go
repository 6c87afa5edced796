package server

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/julienschmidt/httprouter"
)

// ErrNotSynced answers every verb until the cache has synced with the API server: a cache that
// has the nodes but not yet all their pods would see used cards as free.
var ErrNotSynced = errors.New("the extender's cache has not synced with the API server yet; retry shortly")

// Readiness answers the probes, and holds the verbs back until the cache has synced.
type Readiness struct {
	// Ready reports whether the cache has synced with the API server.
	Ready func() bool
	// Leadership, if set, says whether this replica leads (leader election is on).
	Leadership Leadership
}

// WhenReady refuses a request with 503 until the cache has synced.
func (rd Readiness) WhenReady(handle httprouter.Handle) httprouter.Handle {
	return func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
		if !rd.Ready() {
			WriteError(w, http.StatusServiceUnavailable, fmt.Errorf("%s: %w", r.URL.Path, ErrNotSynced))
			return
		}
		handle(w, r, ps)
	}
}

// Healthz answers the liveness probe: 200 while the process serves.
func (rd Readiness) Healthz(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) {
	WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// Readyz answers the readiness probe: 200 once the cache has synced, with whether this replica
// leads and who does when leader election is on (followers stay ready for filter and
// prioritize), 503 before.
func (rd Readiness) Readyz(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) {
	if !rd.Ready() {
		WriteError(w, http.StatusServiceUnavailable, errors.New("informers have not synced yet"))
		return
	}
	body := map[string]string{"status": "ready"}
	if l := rd.Leadership; l != nil { // say who binds
		body["leading"], body["leader"] = fmt.Sprint(l.Leading()), l.Leader()
	}
	WriteJSON(w, http.StatusOK, body)
}

// ReadyzLeader answers 200 only on a ready replica that leads (or runs without leader
// election), 503 elsewhere. It is for a front that balances each request and checks its
// backends' health itself (Envoy, HAProxy): checking this path, it sends the verbs to the
// leader alone and no call takes the follower's extra hop. Kubernetes' readiness probe keeps
// /readyz, so that followers stay Ready for rollouts and the Service.
func (rd Readiness) ReadyzLeader(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	if l := rd.Leadership; rd.Ready() && l != nil && !l.Leading() {
		WriteError(w, http.StatusServiceUnavailable, fmt.Errorf("this replica follows; the leader is %q", l.Leader()))
		return
	}
	rd.Readyz(w, r, ps)
}
