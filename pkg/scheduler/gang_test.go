package scheduler_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	st "github.com/gpushare/gpushare/pkg/cache/testing"
	"github.com/gpushare/gpushare/pkg/scheduler"
)

// gangPod is a pending pod of units in PodGroup group.
func gangPod(name, group string, units int64) *v1.Pod {
	p := st.MakePod().Name(name).GPUMem(units).Obj()
	p.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: &group}
	return p
}

// createPodGroup creates PodGroup name; minCount 0 means a basic (not gang) policy.
func (e *env) createPodGroup(t *testing.T, name string, minCount int32) {
	t.Helper()
	pg := &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}}
	if minCount > 0 {
		pg.Spec.SchedulingPolicy.Gang = &schedulingv1beta1.GangSchedulingPolicy{MinCount: minCount}
	} else {
		pg.Spec.SchedulingPolicy.Basic = &schedulingv1beta1.BasicSchedulingPolicy{}
	}
	if _, err := e.client.SchedulingV1beta1().PodGroups("default").Create(e.ctx, pg, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// bindAll calls BindGang for every pod at once, as kube-scheduler's binding goroutines do, and
// returns each pod's error.
func (e *env) bindAll(pods []string, node string) map[string]error {
	var mu sync.Mutex
	errs := map[string]error{}
	var wg sync.WaitGroup
	for _, p := range pods {
		wg.Go(func() {
			err := e.ext.BindGang(e.ctx, bindArgs(p, node))
			mu.Lock()
			errs[p] = err
			mu.Unlock()
		})
	}
	wg.Wait()
	return errs
}

// used is what the cache charges on node's cards.
func (e *env) used(t *testing.T, node string) []int64 {
	t.Helper()
	n, ok := e.cache.Node(node)
	if !ok {
		t.Fatalf("no node %s", node)
	}
	var out []int64
	for _, g := range n.GPUs {
		out = append(out, g.Used)
	}
	return out
}

// TestBindGang: the binds of a gang's quorum are charged together or not at all.
func TestBindGang(t *testing.T) {
	four := func(group string) []*v1.Pod {
		var pods []*v1.Pod
		for i := range 4 {
			pods = append(pods, gangPod(fmt.Sprintf("%s-%d", group, i), group, 8))
		}
		return pods
	}
	names := []string{"g-0", "g-1", "g-2", "g-3"}
	tests := []struct {
		name     string
		cards    []int64
		minCount int32 // 0: a basic PodGroup
		pods     []*v1.Pod
		bind     []string
		wantErr  string // for every bind; "" for none
		wantUsed []int64
	}{
		{name: "the quorum fits: all bind", cards: []int64{16, 16}, minCount: 4, pods: four("g"), bind: names,
			wantUsed: []int64{16, 16}},
		{name: "node total fits, cards do not: none binds", cards: []int64{12, 12, 12}, minCount: 4, pods: four("g"), bind: names,
			wantErr: "do not all fit their nodes' GPUs", wantUsed: []int64{0, 0, 0}},
		{name: "the quorum does not come: none binds", cards: []int64{16, 16}, minCount: 4, pods: four("g"), bind: names[:3],
			wantErr: "3 of the 4 pods its quorum still needs came to bind", wantUsed: []int64{0, 0}},
		{name: "bound members count toward the quorum", cards: []int64{16, 16}, minCount: 4,
			pods: append(four("g")[:3], st.MakePod().Name("g-3").GPUMem(8).Node("n1").Placement(`{"0":{"0":8}}`).Obj()),
			bind: names[:3], wantUsed: []int64{16, 16}},
		{name: "a pod that alone completes the quorum binds alone", cards: []int64{16, 16}, minCount: 1, pods: four("g"), bind: names[:1],
			wantUsed: []int64{8, 0}},
		{name: "a basic group binds pod by pod", cards: []int64{12, 12, 12}, pods: four("g"), bind: names,
			wantErr: "largest free block", wantUsed: []int64{8, 8, 8}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pods := tt.pods
			group := "g"
			for _, p := range pods {
				if p.Spec.NodeName != "" {
					p.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: &group}
				}
			}
			e := newEnvOpts(t, newPolicy(t, "binpack"), []scheduler.Option{scheduler.WithGangWait(200 * time.Millisecond)},
				[]*v1.Node{st.MakeNode("n1").GPUs(tt.cards...).Obj()}, pods...)
			e.createPodGroup(t, "g", tt.minCount)
			errs := e.bindAll(tt.bind, "n1")
			failed := 0
			for _, p := range tt.bind {
				err := errs[p]
				if err != nil {
					failed++
				}
				switch {
				case tt.wantErr == "" && err != nil:
					t.Errorf("BindGang(%s) = %v, want success", p, err)
				case tt.wantErr != "" && tt.minCount > 0 && (err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, scheduler.ErrGangUnfit)):
					t.Errorf("BindGang(%s) = %v, want ErrGangUnfit with %q", p, err, tt.wantErr)
				}
				bound := e.apiPod(t, p).Spec.NodeName != ""
				if bound != (err == nil) {
					t.Errorf("pod %s bound = %v, but BindGang returned %v", p, bound, err)
				}
			}
			if tt.minCount == 0 && tt.wantErr != "" && failed != 1 {
				t.Errorf("%d binds of the basic group failed, want the one that found no card", failed)
			}
			if diff := cmp.Diff(tt.wantUsed, e.used(t, "n1")); diff != "" {
				t.Errorf("cache n1 used (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestBindGangWithoutPodGroup: a gang pod whose PodGroup cannot be read is not bound.
func TestBindGangWithoutPodGroup(t *testing.T) {
	e := newEnv(t, "binpack", []*v1.Node{st.MakeNode("n1").GPUs(16).Obj()}, gangPod("g-0", "g", 8))
	err := e.ext.BindGang(e.ctx, bindArgs("g-0", "n1"))
	if !errors.Is(err, scheduler.ErrGangUnfit) || !strings.Contains(err.Error(), "read its PodGroup") {
		t.Fatalf("BindGang() = %v, want ErrGangUnfit reading the PodGroup", err)
	}
	if diff := cmp.Diff([]int64{0}, e.used(t, "n1")); diff != "" {
		t.Errorf("cache n1 used (-want,+got):\n%s", diff)
	}
}

// TestBindGangCancelled: a bind kube-scheduler gives up on while the quorum gathers fails the
// round, and nothing is charged.
func TestBindGangCancelled(t *testing.T) {
	e := newEnv(t, "binpack", []*v1.Node{st.MakeNode("n1").GPUs(16, 16).Obj()}, gangPod("g-0", "g", 8), gangPod("g-1", "g", 8), gangPod("g-2", "g", 8))
	e.createPodGroup(t, "g", 3)
	errs := make(chan error, 2)
	go func() { errs <- e.ext.BindGang(e.ctx, bindArgs("g-0", "n1")) }()
	ctx, cancel := context.WithCancel(e.ctx)
	go func() { errs <- e.ext.BindGang(ctx, bindArgs("g-1", "n1")) }()
	time.Sleep(50 * time.Millisecond)
	cancel()
	for range 2 {
		select {
		case err := <-errs:
			if !errors.Is(err, scheduler.ErrGangUnfit) || !strings.Contains(err.Error(), "cancelled") {
				t.Errorf("BindGang() = %v, want ErrGangUnfit for a cancelled bind", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the round did not end when a bind was cancelled")
		}
	}
	if diff := cmp.Diff([]int64{0, 0}, e.used(t, "n1")); diff != "" {
		t.Errorf("cache n1 used (-want,+got):\n%s", diff)
	}
}

// TestBindGangBindFailsAfterCharge: a member whose Bind fails after the gang's charge (here its
// pod cannot be read again) does not keep the charge; the others bind.
func TestBindGangBindFailsAfterCharge(t *testing.T) {
	e := newEnv(t, "binpack", []*v1.Node{st.MakeNode("n1").GPUs(16, 16).Obj()}, gangPod("g-0", "g", 8), gangPod("g-1", "g", 8))
	e.createPodGroup(t, "g", 2)
	var mu sync.Mutex
	gets := 0
	e.client.PrependReactor("get", "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
		if action.(k8stesting.GetAction).GetName() != "g-1" {
			return false, nil, nil
		}
		mu.Lock()
		defer mu.Unlock()
		if gets++; gets == 2 { // BindGang's read passes, Bind's fails
			return true, nil, errors.New("injected get failure")
		}
		return false, nil, nil
	})
	errs := e.bindAll([]string{"g-0", "g-1"}, "n1")
	if errs["g-0"] != nil || errs["g-1"] == nil || !strings.Contains(errs["g-1"].Error(), "injected get failure") {
		t.Fatalf("BindGang() = %v, want g-0 bound and g-1 failing to read its pod", errs)
	}
	if diff := cmp.Diff([]int64{8, 0}, e.used(t, "n1")); diff != "" {
		t.Errorf("cache n1 used (-want,+got):\n%s", diff)
	}
}
