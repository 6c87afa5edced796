package scheduler

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"k8s.io/klog/v2/ktesting"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	st "github.com/gpushare/gpushare/pkg/cache/testing"
	"github.com/gpushare/gpushare/pkg/contract"
)

// TestAnswersEscapeUserPercent: a "%" in a user's value that the extender echoes to
// kube-scheduler (the pod's gpu-model or gpu-count annotation, in a filter reason or a bind
// error) comes doubled, so that kube-scheduler's FailedScheduling event, which it formats with
// the message as the format, prints the user's value as written.
func TestAnswersEscapeUserPercent(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	nodes, pods := routeFixture()
	model := st.MakePod().Name("model").GPUMem(4).Annotation(contract.DefaultModelKey, "A100%d").Obj()
	count := st.MakePod().Name("count").GPUMem(4).Annotation(contract.DefaultGPUsPerContainer, "1%d").Obj()
	ext, _ := extenderOn(logger, nodes, append(pods, model, count))
	srv := httptest.NewServer(NewHandler(ext, func() bool { return true }, HandlerConfig{MaxBody: DefaultMaxBodyBytes}, logger))
	defer srv.Close()
	sprintf := fmt.Sprintf // what kube-scheduler does with the message, as a format
	tests := []struct {
		name, path, body string
		message          func(raw []byte) string
		wantPrinted      string // a part of the message kube-scheduler prints
	}{
		{
			name: "filter reason echoing gpu-model", path: Prefix + "/filter",
			body: mustJSON(t, extenderv1.ExtenderArgs{Pod: model, NodeNames: names("n1")}),
			message: func(raw []byte) string {
				var res extenderv1.ExtenderFilterResult
				if err := json.Unmarshal(raw, &res); err != nil {
					t.Fatal(err)
				}
				return res.FailedAndUnresolvableNodes["n1"]
			},
			wantPrinted: "A100%d",
		},
		{
			name: "filter reason echoing an invalid gpu-count", path: Prefix + "/filter",
			body: mustJSON(t, extenderv1.ExtenderArgs{Pod: count, NodeNames: names("n1")}),
			message: func(raw []byte) string {
				var res extenderv1.ExtenderFilterResult
				if err := json.Unmarshal(raw, &res); err != nil {
					t.Fatal(err)
				}
				return res.FailedAndUnresolvableNodes["n1"]
			},
			wantPrinted: `"1%d"`,
		},
		{
			name: "bind error echoing an invalid gpu-count", path: Prefix + "/bind",
			body: mustJSON(t, extenderv1.ExtenderBindingArgs{PodName: "count", PodNamespace: "default", PodUID: count.UID, Node: "n1"}),
			message: func(raw []byte) string {
				var res extenderv1.ExtenderBindingResult
				if err := json.Unmarshal(raw, &res); err != nil {
					t.Fatal(err)
				}
				return res.Error
			},
			wantPrinted: `"1%d"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, _, raw := do(t, srv, http.MethodPost, tt.path, tt.body)
			if status != http.StatusOK {
				t.Fatalf("status %d: %s", status, raw)
			}
			msg := tt.message(raw)
			if printed := sprintf(msg); !strings.Contains(printed, tt.wantPrinted) || strings.Contains(printed, "%!") {
				t.Errorf("message %q prints as %q, want it to show %s", msg, printed, tt.wantPrinted)
			}
		})
	}
}
