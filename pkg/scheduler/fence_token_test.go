package scheduler_test

import (
	"context"
	"errors"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	st "github.com/gpushare/gpushare/pkg/cache/testing"
	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/scheduler"
	"github.com/gpushare/gpushare/pkg/scheduler/fence"
	"github.com/gpushare/gpushare/pkg/scheduler/server"
)

// stubFencer leads with a fixed fence.
type stubFencer struct{ fence server.Fence }

func (s stubFencer) Leading() bool               { return true }
func (s stubFencer) Leader() string              { return "a" }
func (s stubFencer) Fence() (server.Fence, bool) { return s.fence, true }

// TestBindCarriesFence: a fenced leader's Binding carries its token beside the placement
// annotations; with leader election off (no Fencer) the Binding carries no token. A Binding
// the API server refuses at the fence (403 from gpushare-extender-fence) is rolled back:
// the charge goes, and the refusal is counted apart.
func TestBindCarriesFence(t *testing.T) {
	term := server.Fence{Token: "a@10.0.0.1:8443/3", Deadline: time.Now().Add(time.Minute)}
	refusal := apierrors.NewForbidden(v1.Resource("pods"), "p", errors.New("ValidatingAdmissionPolicy '"+fence.Policy+"' with binding '"+fence.Policy+"' denied request: stale token"))
	for _, tc := range []struct {
		name        string
		leadership  server.Leadership
		refuse      error
		wantToken   string // "" : no fence annotation
		wantErr     bool
		wantRefused float64
	}{
		{name: "election off", leadership: nil},
		{name: "fenced leader", leadership: stubFencer{term}, wantToken: term.Token},
		{name: "refused at the fence", leadership: stubFencer{term}, refuse: refusal, wantToken: term.Token, wantErr: true, wantRefused: 1},
		{name: "refused by another policy", leadership: stubFencer{term}, refuse: apierrors.NewForbidden(v1.Resource("pods"), "p", errors.New("denied")), wantToken: term.Token, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nodes := []*v1.Node{st.MakeNode("n1").GPUs(16).Obj()}
			e := newEnv(t, "binpack", nodes, st.MakePod().Name("p").GPUMem(4).Obj())
			var sent *v1.Binding
			e.client.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
				if a.GetSubresource() != "binding" {
					return false, nil, nil
				}
				sent = a.(k8stesting.CreateAction).GetObject().(*v1.Binding).DeepCopy()
				return tc.refuse != nil, nil, tc.refuse
			})
			var opts []scheduler.Option
			if tc.leadership != nil {
				opts = append(opts, scheduler.WithLeadership(tc.leadership))
			}
			ext := scheduler.NewExtender(e.cache, e.client, newPolicy(t, "binpack"), contract.DefaultNames(), opts...)
			err := ext.Bind(context.Background(), bindArgs("p", "n1"))
			if (err != nil) != tc.wantErr {
				t.Fatalf("Bind() = %v, want error %v", err, tc.wantErr)
			}
			if sent == nil {
				t.Fatal("no Binding sent")
			}
			token, has := sent.Annotations[contract.AnnotationFence]
			if token != tc.wantToken || has != (tc.wantToken != "") {
				t.Errorf("Binding's %s = %q (present %v), want %q", contract.AnnotationFence, token, has, tc.wantToken)
			}
			if _, ok := sent.Annotations[contract.AnnotationAllocation]; !ok {
				t.Errorf("the Binding lost its placement annotations: %v", sent.Annotations)
			}
			if got := counter(t, ext.Metrics(), "gpushare_bind_fence_refused_total"); got != tc.wantRefused {
				t.Errorf("gpushare_bind_fence_refused_total = %v, want %v", got, tc.wantRefused)
			}
			if tc.wantErr {
				if n, _ := e.cache.Node("n1"); n.GPUs[0].Used != 0 {
					t.Errorf("a refused Binding left %d units charged", n.GPUs[0].Used)
				}
				if got := counter(t, ext.Metrics(), "gpushare_bind_rollbacks_total"); got != 1 {
					t.Errorf("gpushare_bind_rollbacks_total = %v, want 1", got)
				}
			}
		})
	}
}
