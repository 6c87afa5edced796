package scheduler_test

import (
	"errors"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2/ktesting"

	st "github.com/gpushare/gpushare/pkg/cache/testing"
	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/scheduler"
	"github.com/gpushare/gpushare/pkg/scheduler/fence"
	"github.com/gpushare/gpushare/pkg/scheduler/server"
	servertesting "github.com/gpushare/gpushare/pkg/scheduler/server/testing"
)

// leadingElector runs an elector with clock on client's Leases until the test ends and
// returns it once it leads.
func leadingElector(t *testing.T, client *fake.Clientset, clock *servertesting.FakeClock) *server.Elector {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	el, err := server.NewElector(client, servertesting.ShippedElection("a"), server.WithElectorClock(clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	servertesting.RunElector(ctx, t, el)
	servertesting.WaitFor(t, "the elector to lead", el.Leading)
	return el
}

// TestElectorFence: a replica leads only while less than lease duration - safety margin (8 -
// 2 s) has passed on its own clock since its last Lease write that succeeded, whatever
// client-go's callbacks last said. A replica resumed after a pause of 10 s refuses to bind at
// once, before any Lease call, and charges nothing.
func TestElectorFence(t *testing.T) {
	tests := []struct {
		name        string
		paused      time.Duration
		wantLeading bool
	}{
		{name: "just renewed", paused: 0, wantLeading: true},
		{name: "within the fence", paused: 5900 * time.Millisecond, wantLeading: true},
		{name: "past lease minus margin", paused: 6 * time.Second, wantLeading: false},
		{name: "resumed after a 10 s pause", paused: 10 * time.Second, wantLeading: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nodes := []*v1.Node{st.MakeNode("n1").GPUs(16).Obj()}
			e := newEnv(t, "binpack", nodes, st.MakePod().Name("p").GPUMem(4).Obj())
			clock := servertesting.NewFakeClock()
			el := leadingElector(t, e.client, clock)
			clock.Step(tt.paused)
			if got := el.Leading(); got != tt.wantLeading {
				t.Fatalf("Leading() %v after the last renewal = %v, want %v", tt.paused, got, tt.wantLeading)
			}
			ext := scheduler.NewExtender(e.cache, e.client, newPolicy(t, "binpack"), contract.DefaultNames(), scheduler.WithLeadership(el))
			e.client.ClearActions()
			err := ext.Bind(e.ctx, bindArgs("p", "n1"))
			if tt.wantLeading {
				if err != nil {
					t.Fatalf("Bind() = %v on a current leader", err)
				}
				return
			}
			if !errors.Is(err, fence.ErrNotLeader) {
				t.Fatalf("Bind() = %v, want ErrNotLeader", err)
			}
			assertUnbound(t, e, "p")
		})
	}
}

// TestBindFencedAtWrite: leadership that lapses between the bind's decision and its Binding
// write (a pause, a slow cache) stops the write: the bind is refused with ErrNotLeader, no
// Binding is sent and the pod's assumed charge is rolled back.
func TestBindFencedAtWrite(t *testing.T) {
	nodes := []*v1.Node{st.MakeNode("n1").GPUs(16).Obj()}
	e := newEnv(t, "binpack", nodes, st.MakePod().Name("p").GPUMem(4).Obj())
	clock := servertesting.NewFakeClock()
	el := leadingElector(t, e.client, clock)
	// The extender reads its own clock once, after charging the card and before the write
	// (the assume-time annotation): the replica "pauses" there for 10 s.
	paused := func() time.Time { clock.Step(10 * time.Second); return clock.Now() }
	ext := scheduler.NewExtender(e.cache, e.client, newPolicy(t, "binpack"), contract.DefaultNames(),
		scheduler.WithLeadership(el), scheduler.WithClock(paused))
	e.client.ClearActions()
	if err := ext.Bind(e.ctx, bindArgs("p", "n1")); !errors.Is(err, fence.ErrNotLeader) {
		t.Fatalf("Bind() = %v, want ErrNotLeader", err)
	}
	assertUnbound(t, e, "p")
	if got := counter(t, ext.Metrics(), "gpushare_bind_rollbacks_total"); got != 1 {
		t.Errorf("gpushare_bind_rollbacks_total = %v, want 1", got)
	}
}

// TestSettleFenced: a bind of unknown outcome whose leadership lapses is settled by reading,
// never by a second Binding: while the pod stays unbound (its first Binding may still land)
// the charge stays; the settler writes nothing.
func TestSettleFenced(t *testing.T) {
	nodes := []*v1.Node{st.MakeNode("n1").GPUs(16).Obj()}
	e := newEnv(t, "binpack", nodes, st.MakePod().Name("p").GPUMem(4).Obj())
	clock := servertesting.NewFakeClock()
	// The first Binding times out, and the replica is paused for 10 s right after. (Added before
	// the elector runs: the fake's reactors may not change while its renewals call it.)
	e.client.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "binding" {
			return false, nil, nil
		}
		clock.Step(10 * time.Second)
		return true, nil, errors.New("injected timeout")
	})
	el := leadingElector(t, e.client, clock)
	ext := scheduler.NewExtender(e.cache, e.client, newPolicy(t, "binpack"), contract.DefaultNames(), scheduler.WithLeadership(el),
		scheduler.WithSettleOptions(scheduler.SettleOptions{FirstRetry: time.Millisecond, MaxRetry: 5 * time.Millisecond, Timeout: 200 * time.Millisecond}))
	e.client.ClearActions()
	if err := ext.Bind(e.ctx, bindArgs("p", "n1")); err == nil {
		t.Fatal("Bind() = nil, want the unknown outcome")
	}
	ext.WaitSettled(e.ctx)
	if got := bindings(e.client); got != 1 {
		t.Errorf("%d Binding writes, want 1: a replica whose leadership lapsed wrote again while settling", got)
	}
	if p, ok := e.cache.Pod(types.UID("uid-p")); !ok || p.Node != "n1" {
		t.Errorf("the unsettled pod's charge was dropped (cache: %+v, %v)", p, ok)
	}
}

// bindings counts the Binding writes client saw.
func bindings(client *fake.Clientset) int {
	n := 0
	for _, a := range client.Actions() {
		if a.GetVerb() == "create" && a.GetSubresource() == "binding" {
			n++
		}
	}
	return n
}

// assertUnbound fails unless the pod is unbound in the API, no Binding was sent since the
// actions were last cleared, and the cache charges nothing for it.
func assertUnbound(t *testing.T, e *env, name string) {
	t.Helper()
	if got := e.apiPod(t, name); got.Spec.NodeName != "" {
		t.Errorf("pod bound to %q by a replica whose leadership had lapsed", got.Spec.NodeName)
	}
	if n := bindings(e.client); n != 0 {
		t.Errorf("%d Binding writes, want 0", n)
	}
	if p, ok := e.cache.Pod(types.UID("uid-" + name)); ok {
		t.Errorf("the cache still holds the refused pod: %+v", p)
	}
	if n, _ := e.cache.Node("n1"); n.GPUs[0].Used != 0 {
		t.Errorf("card 0 of n1 has %d units charged, want 0", n.GPUs[0].Used)
	}
}

// counter is the value of the extender's counter name.
func counter(t *testing.T, m *scheduler.Metrics, name string) float64 {
	t.Helper()
	families, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name && len(f.GetMetric()) == 1 {
			return f.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("no counter %s", name)
	return 0
}
