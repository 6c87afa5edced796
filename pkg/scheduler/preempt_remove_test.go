package scheduler_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gpushare/gpushare/pkg/scheduler"
	"github.com/gpushare/gpushare/pkg/scheduler/preempt"
	"github.com/gpushare/gpushare/pkg/scheduler/server"
)

// TestPreemptRemovesVictimByMarkedDelete: a preemption removes its victim as the extender's
// admission policy allows (config/admission/extender-pods.yaml): a dry-run eviction (its
// PodDisruptionBudgets), then a patch marking the victim gpushare.io/preempted-by
// "<namespace>/<name>/<priority>" of the preemptor (with the victim's UID, and the fence
// token when leader election is on), then a DELETE with a UID precondition and the victim's
// own grace period; never a real eviction. A mark the API server refuses sends no DELETE and
// removes nothing. A victim of ProtectedPriority or above, which the policy would not let the
// extender delete, is never chosen.
func TestPreemptRemovesVictimByMarkedDelete(t *testing.T) {
	fence := server.Fence{Token: "a@10.0.0.1:8443/3", Deadline: time.Now().Add(time.Minute)}
	dryRun, del := "create pods/eviction b dryRun=[All]", "delete pods b uid=uid-b grace=<nil>"
	for _, tc := range []struct {
		name       string
		leadership server.Leadership
		victimPrio int32 // b's priority; the preemptor p has victimPrio+100
		refuseMark bool
		want       []string // the requests on b, in order
		wantGone   []string
	}{
		{name: "election off", want: []string{dryRun, `patch pods b {"annotations":{"gpushare.io/preempted-by":"default/p/100"},"uid":"uid-b"}`, del}, wantGone: []string{"b"}},
		{name: "fenced leader", leadership: stubFencer{fence}, want: []string{dryRun,
			`patch pods b {"annotations":{"gpushare.io/fence":"a@10.0.0.1:8443/3","gpushare.io/preempted-by":"default/p/100"},"uid":"uid-b"}`, del}, wantGone: []string{"b"}},
		{name: "negative priorities", victimPrio: -200, want: []string{dryRun, `patch pods b {"annotations":{"gpushare.io/preempted-by":"default/p/-100"},"uid":"uid-b"}`, del}, wantGone: []string{"b"}},
		{name: "mark refused: no delete", refuseMark: true, want: []string{dryRun, `patch pods b {"annotations":{"gpushare.io/preempted-by":"default/p/100"},"uid":"uid-b"}`}},
		{name: "victim of protected priority", victimPrio: preempt.ProtectedPriority},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := &evictions{}
			var opts []scheduler.Option
			if tc.leadership != nil {
				opts = append(opts, scheduler.WithLeadership(tc.leadership))
			}
			b := prio(low("b", 0, 16), tc.victimPrio, false)
			p := prio(high("p"), tc.victimPrio+100, false)
			e := cardsEnv(t, ev, []int64{16}, opts, b, p)
			if tc.refuseMark {
				e.client.PrependReactor("patch", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
					if a.(k8stesting.PatchAction).GetName() != "b" {
						return false, nil, nil
					}
					return true, nil, apierrors.NewForbidden(v1.Resource("pods"), "b", errors.New("denied"))
				})
			}
			preemptVerb(e, p, "b")
			if diff := cmp.Diff(tc.want, requestsOn(t, e, "b")); diff != "" {
				t.Errorf("requests on the victim (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantGone, ev.done()); diff != "" {
				t.Errorf("pods deleted (-want,+got):\n%s", diff)
			}
			want := float64(len(tc.wantGone))
			if got := counter(t, e.ext.Metrics(), "gpushare_preemption_victims_total"); got != want {
				t.Errorf("gpushare_preemption_victims_total = %g, want %g", got, want)
			}
		})
	}
}

// requestsOn lists the writes the extender sent about pod name, one line each: evictions with
// their dry run, patches with their metadata, deletes with their UID precondition and grace
// period.
func requestsOn(t *testing.T, e *env, name string) []string {
	t.Helper()
	var out []string
	for _, a := range e.client.Actions() {
		switch a := a.(type) {
		case k8stesting.CreateAction:
			if ev, ok := a.GetObject().(*policyv1.Eviction); ok && ev.Name == name {
				out = append(out, fmt.Sprintf("create pods/eviction %s dryRun=%v", name, ev.DeleteOptions.DryRun))
			}
		case k8stesting.PatchAction:
			if a.GetName() != name {
				continue
			}
			var patch struct{ Metadata json.RawMessage }
			if err := json.Unmarshal(a.GetPatch(), &patch); err != nil {
				t.Fatal(err)
			}
			out = append(out, fmt.Sprintf("patch pods %s %s", name, patch.Metadata))
		case k8stesting.DeleteAction:
			if a.GetName() != name {
				continue
			}
			opts := a.GetDeleteOptions()
			var uid any = "<nil>"
			if opts.Preconditions != nil && opts.Preconditions.UID != nil {
				uid = *opts.Preconditions.UID
			}
			var grace any = "<nil>"
			if opts.GracePeriodSeconds != nil {
				grace = *opts.GracePeriodSeconds
			}
			out = append(out, fmt.Sprintf("delete pods %s uid=%v grace=%v", name, uid, grace))
		}
	}
	return out
}
