package scheduler

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"k8s.io/klog/v2/ktesting"
)

// nameArray is a JSON array of n node names.
func nameArray(n int) string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%q", fmt.Sprintf("n%d", i))
	}
	return "[" + strings.Join(out, ",") + "]"
}

func TestHandlerBoundsItsInputs(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	nodes, pods := routeFixture()
	ext, _ := extenderOn(logger, nodes, pods)
	pod := `{"metadata":{"name":"p","namespace":"default","uid":"uid-p"},"spec":{"containers":[{"name":"c","resources":{"limits":{"aliyun.com/gpu-mem":"4"}}}]}}`
	srv := httptest.NewServer(NewHandler(ext, func() bool { return true }, HandlerConfig{MaxBody: 1 << 20}, logger))
	defer srv.Close()
	victims := func(n int) string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf(`"n%d":{"Pods":[]}`, i)
		}
		return `{"Pod":` + pod + `,"NodeNameToMetaVictims":{` + strings.Join(out, ",") + `}}`
	}
	tests := []struct {
		name, path, body string
		wantStatus       int
		want             string
	}{
		{"filter of MaxNodeNames", "/filter", `{"Pod":` + pod + `,"NodeNames":` + nameArray(MaxNodeNames) + `}`, http.StatusOK, `"NodeNames"`},
		{"filter of one name too many", "/filter", `{"Pod":` + pod + `,"NodeNames":` + nameArray(MaxNodeNames+1) + `}`, http.StatusBadRequest, "25001 candidate nodes, at most 25000 are accepted"},
		{"prioritize of one name too many", "/prioritize", `{"Pod":` + pod + `,"NodeNames":` + nameArray(MaxNodeNames+1) + `}`, http.StatusBadRequest, "25001 candidate nodes"},
		{"preempt of one node too many", "/preempt", victims(MaxNodeNames + 1), http.StatusBadRequest, "25001 candidate nodes"},
		{"body over MaxBody", "/filter", `{"Pod":` + pod + `,"NodeNames":` + nameArray(200000) + `}`, http.StatusRequestEntityTooLarge, "larger than the 1048576 the extender accepts"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, _, body := do(t, srv, http.MethodPost, Prefix+tc.path, tc.body)
			if status != tc.wantStatus || !strings.Contains(string(body), tc.want) {
				t.Errorf("POST %s = %d %.300s, want %d and %q", tc.path, status, body, tc.wantStatus, tc.want)
			}
		})
	}
}
