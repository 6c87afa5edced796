package server

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/julienschmidt/httprouter"
)

// stubLeadership leads or follows "other".
type stubLeadership struct{ leading bool }

func (s stubLeadership) Leading() bool { return s.leading }
func (s stubLeadership) Leader() string {
	if s.leading {
		return "self"
	}
	return "other"
}

// TestReadiness: /readyz is 200 once synced, naming who leads under leader election;
// /readyz/leader is 200 only on a synced replica that leads or runs without election;
// /healthz is always 200; a verb is held back (503) until synced.
func TestReadiness(t *testing.T) {
	follower, leader := stubLeadership{}, stubLeadership{leading: true}
	tests := []struct {
		name       string
		synced     bool
		leadership Leadership
		path       string
		wantStatus int
		wantBody   string
	}{
		{name: "healthz before sync", path: "/healthz", wantStatus: http.StatusOK, wantBody: `{"status":"ok"}`},
		{name: "readyz before sync", path: "/readyz", wantStatus: http.StatusServiceUnavailable, wantBody: `{"error":"informers have not synced yet"}`},
		{name: "readyz without election", synced: true, path: "/readyz", wantStatus: http.StatusOK, wantBody: `{"status":"ready"}`},
		{name: "readyz on a follower", synced: true, leadership: follower, path: "/readyz", wantStatus: http.StatusOK,
			wantBody: `{"leader":"other","leading":"false","status":"ready"}`},
		{name: "readyz/leader without election", synced: true, path: "/readyz/leader", wantStatus: http.StatusOK, wantBody: `{"status":"ready"}`},
		{name: "readyz/leader on the leader", synced: true, leadership: leader, path: "/readyz/leader", wantStatus: http.StatusOK,
			wantBody: `{"leader":"self","leading":"true","status":"ready"}`},
		{name: "readyz/leader on a follower", synced: true, leadership: follower, path: "/readyz/leader", wantStatus: http.StatusServiceUnavailable,
			wantBody: `{"error":"this replica follows; the leader is \"other\""}`},
		{name: "readyz/leader on a leader before sync", leadership: leader, path: "/readyz/leader", wantStatus: http.StatusServiceUnavailable,
			wantBody: `{"error":"informers have not synced yet"}`},
		{name: "verb before sync", path: "/verb", wantStatus: http.StatusServiceUnavailable, wantBody: `{"error":"/verb: ` + ErrNotSynced.Error() + `"}`},
		{name: "verb once synced", synced: true, path: "/verb", wantStatus: http.StatusOK, wantBody: `"served"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rd := Readiness{Ready: func() bool { return tc.synced }, Leadership: tc.leadership}
			r := httprouter.New()
			r.GET("/healthz", rd.Healthz)
			r.GET("/readyz", rd.Readyz)
			r.GET("/readyz/leader", rd.ReadyzLeader)
			r.GET("/verb", rd.WhenReady(func(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) {
				WriteJSON(w, http.StatusOK, "served")
			}))
			rec := httptest.NewRecorder()
			r.ServeHTTP(rec, httptest.NewRequestWithContext(t.Context(), http.MethodGet, tc.path, nil))
			if diff := cmp.Diff([]any{tc.wantStatus, tc.wantBody}, []any{rec.Code, rec.Body.String()}); diff != "" {
				t.Errorf("GET %s (-want,+got):\n%s", tc.path, diff)
			}
		})
	}
}
