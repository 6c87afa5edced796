package deviceplugin

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	st "github.com/gpushare/gpushare/pkg/cache/testing"
	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/deviceplugin/nvml"
	"github.com/gpushare/gpushare/pkg/deviceplugin/nvml/mockhost"
)

// ledgerView is what a test sees of one admit: the answer and the ledger after it.
type ledgerView struct {
	Best     string // "pod/container", "" for none
	Broken   bool
	Over     bool
	Wait     bool
	Rejected int
	Handouts []string // "pod/container devices", in order
	Refused  []types.UID
}

func viewOf(t *tracker, ans admitAnswer) ledgerView {
	v := ledgerView{Over: ans.over != "", Wait: ans.wait, Rejected: len(ans.rejected)}
	if ans.best != nil {
		v.Best, v.Broken = ans.best.pod.Name+"/"+ans.best.container.Name, ans.best.broken != ""
	}
	for _, h := range t.snapshot() {
		v.Handouts = append(v.Handouts, h.owner.pod.Name+"/"+h.owner.name+" "+h.devices)
	}
	for uid := range t.refused {
		v.Refused = append(v.Refused, uid)
	}
	slices.Sort(v.Refused)
	return v
}

func testRules(t *testing.T) (admitRules, int64) {
	t.Helper()
	host, err := mockhost.New("dgxa100", mockhost.Options{MemoryBytes: 16 << 30})
	if err != nil {
		t.Fatal(err)
	}
	names := contract.DefaultNames()
	inv, err := newInventory(nvml.New(host), &names, 0)
	if err != nil {
		t.Fatal(err)
	}
	card, ok := inv.lookup(0)
	if !ok {
		t.Fatal("mock host has no GPU 0")
	}
	return admitRules{names: &names, inv: inv, node: testNode}, card.units
}

func ledgerPod(name string, created int, units int64, alloc contract.Allocation) *st.PodWrapper {
	w := st.MakePod().Name(name).Node(testNode).Created(t0.Add(time.Duration(created)*time.Second)).NamedGPUMem("c", units)
	if alloc != nil {
		w = w.Allocation(alloc)
	}
	return w
}

func defaultNN(name string) types.NamespacedName {
	return types.NamespacedName{Namespace: "default", Name: name}
}

func TestTrackerAdmit(t *testing.T) {
	rules, cardUnits := testRules(t)
	on0 := contract.Allocation{"0": {0: 2}}
	a := ledgerPod("a", 2, 2, on0).Obj()
	b := ledgerPod("b", 1, 2, on0).Obj()
	two := st.MakePod().Name("m").Node(testNode).Created(t0).NamedGPUMem("c1", 2).NamedGPUMem("c2", 2).
		Allocation(contract.Allocation{"0": {0: 2}, "1": {1: 2}}).Obj()
	full := ledgerPod("full", 0, cardUnits-1, contract.Allocation{"0": {0: cardUnits - 1}}).
		Annotation(contract.AnnotationAssigned, "true").Obj()
	tests := []struct {
		name    string
		seed    func(*tracker)
		pods    []*v1.Pod
		kv      *kubeletView
		units   int64
		handOut bool
		want    ledgerView
	}{
		{name: "earliest pod wins and is handed out", pods: []*v1.Pod{a, b}, units: 2, handOut: true,
			want: ledgerView{Best: "b/c", Handouts: []string{"b/c d1,d2"}}},
		{name: "a preference records nothing", pods: []*v1.Pod{a, b}, units: 2,
			want: ledgerView{Best: "b/c"}},
		{name: "the next container after a handout", pods: []*v1.Pod{two}, units: 2, handOut: true,
			seed: func(t *tracker) {
				t.handouts = []*handout{{owner: containerRef{uid: two.UID, pod: defaultNN("m"), key: "0", name: "c1"}, devices: "d0"}}
			},
			want: ledgerView{Best: "m/c2", Handouts: []string{"m/c1 d0", "m/c2 d1,d2"}}},
		{name: "a size that no next container asks", pods: []*v1.Pod{a, b}, units: 3, handOut: true,
			want: ledgerView{Rejected: 2}},
		{name: "no placement: broken and refused", pods: []*v1.Pod{a, ledgerPod("b", 1, 2, nil).Obj()}, units: 2, handOut: true,
			want: ledgerView{Best: "b/c", Broken: true, Refused: []types.UID{"uid-b"}}},
		{name: "a refused pod is no candidate", pods: []*v1.Pod{a, b}, units: 2, handOut: true,
			seed: func(t *tracker) { t.refuseLocked("uid-b") },
			want: ledgerView{Best: "a/c", Handouts: []string{"a/c d1,d2"}, Refused: []types.UID{"uid-b"}}},
		{name: "a refused pod is forgotten when it leaves", pods: []*v1.Pod{a}, units: 2, handOut: true,
			seed: func(t *tracker) { t.refuseLocked("uid-gone") },
			want: ledgerView{Best: "a/c", Handouts: []string{"a/c d1,d2"}}},
		{name: "over capacity: refused, nothing handed out", pods: []*v1.Pod{full, a}, units: 2, handOut: true,
			want: ledgerView{Best: "a/c", Over: true, Refused: []types.UID{"uid-a"}}},
		{name: "the kubelet's view narrows the candidates", pods: []*v1.Pod{a, b}, units: 2, handOut: true,
			kv:   &kubeletView{pods: map[types.NamespacedName]map[string]string{defaultNN("a"): {}}},
			want: ledgerView{Best: "a/c", Handouts: []string{"a/c d1,d2"}}},
		{name: "the kubelet holds a pod not seen yet: wait", pods: []*v1.Pod{a}, units: 2, handOut: true,
			kv:   &kubeletView{pods: map[types.NamespacedName]map[string]string{defaultNN("x"): {}}},
			want: ledgerView{Wait: true}},
		{name: "the kubelet lists none of the candidates: relaxed", pods: []*v1.Pod{a}, units: 2, handOut: true,
			kv:   &kubeletView{pods: map[types.NamespacedName]map[string]string{defaultNN("x"): {"c": "d9"}}},
			want: ledgerView{Best: "a/c", Handouts: []string{"a/c d1,d2"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := &tracker{}
			if tc.seed != nil {
				tc.seed(l)
			}
			ans := l.admit(rules, admitQuery{pods: tc.pods, kv: tc.kv, units: tc.units, ids: []string{"d2", "d1"}, handOut: tc.handOut})
			if diff := cmp.Diff(tc.want, viewOf(l, ans)); diff != "" {
				t.Errorf("admit (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestTrackerHandouts(t *testing.T) {
	now := time.Now()
	old := now.Add(-time.Hour)
	ref := func(pod, name string) containerRef {
		return containerRef{uid: types.UID("uid-" + pod), pod: defaultNN(pod), key: "0", name: name}
	}
	seed := func() *tracker {
		return &tracker{handouts: []*handout{
			{owner: ref("a", "c"), devices: "d1", at: now, placement: map[int]int64{0: 1}},
			{owner: ref("b", "c"), devices: "d2", at: old, placement: map[int]int64{1: 1}},
			{owner: ref("c", "c"), devices: "d3", at: now, verified: true},
		}}
	}
	tests := []struct {
		name string
		op   func(*tracker)
		want []string // "pod/container devices verified"
	}{
		{name: "confirm moves the handout to its owner",
			op:   func(l *tracker) { l.confirm("d1", now, ref("z", "w")) },
			want: []string{"z/w d1 true", "b/c d2 false", "c/c d3 true"}},
		{name: "confirm of another time changes nothing",
			op:   func(l *tracker) { l.confirm("d1", old, ref("z", "w")) },
			want: []string{"a/c d1 false", "b/c d2 false", "c/c d3 true"}},
		{name: "retract drops only that owner's handout",
			op:   func(l *tracker) { l.retract("d1", ref("b", "c")); l.retract("d2", ref("b", "c")) },
			want: []string{"a/c d1 false", "c/c d3 true"}},
		{name: "forgetSettled keeps live pods and fresh guesses",
			op:   func(l *tracker) { l.forgetSettled(map[types.UID]bool{"uid-c": true}, time.Minute) },
			want: []string{"a/c d1 false", "c/c d3 true"}},
		{name: "forgetSettled drops verified handouts of settled pods",
			op:   func(l *tracker) { l.forgetSettled(map[types.UID]bool{}, 2*time.Hour) },
			want: []string{"a/c d1 false", "b/c d2 false"}},
		{name: "a snapshot is a copy",
			op: func(l *tracker) {
				s := l.snapshot()
				s[0].verified, s[0].placement[0] = true, 99
			},
			want: []string{"a/c d1 false", "b/c d2 false", "c/c d3 true"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := seed()
			tc.op(l)
			var got []string
			for _, h := range l.snapshot() {
				got = append(got, h.owner.pod.Name+"/"+h.owner.name+" "+h.devices+" "+strconv.FormatBool(h.verified))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("handouts (-want,+got):\n%s", diff)
			}
			if p := l.snapshot()[0].placement; p != nil && p[0] != 1 {
				t.Errorf("placement of the first handout = %v, want it untouched", p)
			}
		})
	}
}
