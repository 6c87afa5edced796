package draconvert_test

import (
	"errors"
	"fmt"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	dracel "k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"

	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/draconvert"
)

// The claims a conversion writes, allocated by kube-scheduler's own allocator
// (k8s.io/dynamic-resource-allocation/structured, with v1.37's default gates) on devices
// published as the gpushare DRA driver publishes them: what the scheduler will make of them.

// allocatorFeatures are the allocator features of kube-scheduler v1.37 with its default gates.
func allocatorFeatures() structured.Features {
	return structured.Features{AdminAccess: true, PrioritizedList: true, PartitionableDevices: true, DeviceTaints: true,
		DeviceBindingAndStatus: true, ConsumableCapacity: true, FractionalCapacityRange: true}
}

// testCard is a card of the test node: its model and memory in GiB.
type testCard struct {
	model string
	gib   int64
}

// gpuSlice is the ResourceSlice of node's cards: one device per card with the driver's
// attributes, memory in bytes (requests rounded up to whole GiB units) and cores (0-100,
// nothing by default), shareable.
func gpuSlice(node string, cards ...testCard) *resourcev1.ResourceSlice {
	unit := resource.MustParse("1Gi")
	devs := make([]resourcev1.Device, len(cards))
	for i, c := range cards {
		devs[i] = resourcev1.Device{
			Name: "gpu-" + strconv.Itoa(i),
			Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
				draconvert.AttributeUUID:  {StringValue: ptr.To(fmt.Sprintf("GPU-%s-%d", node, i))},
				draconvert.AttributeModel: {StringValue: ptr.To(c.model)},
				"index":                   {IntValue: ptr.To(int64(i))},
			},
			Capacity: map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{
				draconvert.CapacityMemory: {Value: *resource.NewQuantity(c.gib<<30, resource.BinarySI), RequestPolicy: &resourcev1.CapacityRequestPolicy{
					Default: &unit, ValidRange: &resourcev1.CapacityRequestPolicyRange{Min: &unit, Step: &unit}}},
				draconvert.CapacityCores: {Value: resource.MustParse("100"), RequestPolicy: &resourcev1.CapacityRequestPolicy{
					Default: ptr.To(resource.MustParse("0")), ValidRange: &resourcev1.CapacityRequestPolicyRange{
						Min: ptr.To(resource.MustParse("0")), Max: ptr.To(resource.MustParse("100")), Step: ptr.To(resource.MustParse("1"))}}},
			},
			AllowMultipleAllocations: ptr.To(true),
		}
	}
	return &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: node + "-gpus"},
		Spec: resourcev1.ResourceSliceSpec{Driver: draconvert.DefaultDriver, NodeName: &node,
			Pool: resourcev1.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1}, Devices: devs},
	}
}

// classes lists the gpushare DeviceClass: the driver's devices.
type classes struct{}

func (classes) List() ([]*resourcev1.DeviceClass, error) {
	c, err := classes{}.Get(draconvert.DefaultDeviceClass)
	return []*resourcev1.DeviceClass{c}, err
}

func (classes) Get(name string) (*resourcev1.DeviceClass, error) {
	if name != draconvert.DefaultDeviceClass {
		return nil, errors.New("no device class " + name)
	}
	return &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: resourcev1.DeviceClassSpec{
		Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: `device.driver == "` + draconvert.DefaultDriver + `"`}}},
	}}, nil
}

// node allocates pods' claims one pod after another on one node, keeping what each took.
type node struct {
	slice *resourcev1.ResourceSlice
	state structured.AllocatedState
	cache *dracel.Cache
}

func newNode(cards ...testCard) *node {
	return &node{slice: gpuSlice("n1", cards...), cache: dracel.NewCache(10, dracel.Features{EnableConsumableCapacity: true}),
		state: structured.AllocatedState{AllocatedDevices: sets.New[structured.DeviceID](), AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](),
			AggregatedCapacity: structured.NewConsumedCapacityCollection()}}
}

// allocate converts pod and allocates its claims: per claim, the devices it got with the
// memory each consumed, e.g. "gpu-0:4Gi"; nil when the pod does not fit.
func (n *node) allocate(t *testing.T, pod *v1.Pod) [][]string {
	t.Helper()
	cfg := draconvert.DefaultConfig(contract.DefaultNames())
	conv, err := draconvert.Convert(pod, &cfg)
	if err != nil {
		t.Fatal(err)
	}
	var claims []*resourcev1.ResourceClaim
	for i, c := range conv.Claims {
		claim := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: pod.Name + "-" + c.PodClaimName, Namespace: testNamespace,
			UID: types.UID(pod.Name + strconv.Itoa(i))}, Spec: *c.Template.Spec.Spec.DeepCopy()}
		claims = append(claims, claim)
	}
	alloc, err := structured.NewAllocator(t.Context(), allocatorFeatures(), n.state, classes{}, []*resourcev1.ResourceSlice{n.slice}, n.cache)
	if err != nil {
		t.Fatal(err)
	}
	results, err := alloc.Allocate(t.Context(), &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, claims)
	if err != nil {
		t.Fatalf("Allocate: %v", err)
	}
	if results == nil {
		return nil
	}
	out := make([][]string, len(results))
	for i, r := range results {
		for _, d := range r.Devices.Results {
			id := structured.MakeDeviceID(d.Driver, d.Pool, d.Device)
			n.state.AllocatedSharedDeviceIDs.Insert(structured.MakeSharedDeviceID(id, d.ShareID))
			n.state.AggregatedCapacity.Insert(structured.NewDeviceConsumedCapacity(id, d.ConsumedCapacity))
			mem := d.ConsumedCapacity[draconvert.CapacityMemory]
			got := d.Device + ":" + mem.String()
			if cores, ok := d.ConsumedCapacity[draconvert.CapacityCores]; ok && !cores.IsZero() {
				got += "/" + cores.String()
			}
			out[i] = append(out[i], got)
		}
	}
	return out
}

func TestClaimsAllocated(t *testing.T) {
	card16 := testCard{"NVIDIA A100-PCIE-16GB", 16}
	type step struct {
		pod  *v1.Pod
		want [][]string // nil: does not fit
	}
	tests := []struct {
		name  string
		cards []testCard
		steps []step
	}{
		{"one card: 4 GiB of it", []testCard{card16}, []step{{pod: makePod(app("main", 4)), want: [][]string{{"gpu-0:4Gi"}}}}},
		{"pods share a card until its memory is gone", []testCard{card16, card16}, []step{
			{pod: makePod(app("main", 4)), want: [][]string{{"gpu-0:4Gi"}}},
			{pod: makePod(app("main", 12)), want: [][]string{{"gpu-0:12Gi"}}},
			{pod: makePod(app("main", 1)), want: [][]string{{"gpu-1:1Gi"}}},
		}},
		{"two cards, half each", []testCard{card16, card16}, []step{
			{pod: makePod(app("main", 8), annotate(contract.DefaultGPUsPerContainer, "2")), want: [][]string{{"gpu-0:4Gi", "gpu-1:4Gi"}}},
		}},
		{"two cards on a node of one: does not fit", []testCard{card16}, []step{
			{pod: makePod(app("main", 8), annotate(contract.DefaultGPUsPerContainer, "2")), want: nil},
		}},
		{"model list picks the card", []testCard{{"Tesla T4", 16}, {"NVIDIA H100 80GB HBM3", 80}}, []step{
			{pod: makePod(app("main", 4), annotate(contract.DefaultModelKey, "A100|H100")), want: [][]string{{"gpu-1:4Gi"}}},
			{pod: makePod(app("main", 4), annotate(contract.DefaultModelKey, "V100")), want: nil},
		}},
		{"cores are held: two 60% pods do not share a card", []testCard{card16, card16}, []step{
			{pod: makePod(app("main", 2), annotate(contract.DefaultCoreKey, "60")), want: [][]string{{"gpu-0:2Gi/60"}}},
			{pod: makePod(app("main", 2), annotate(contract.DefaultCoreKey, "60")), want: [][]string{{"gpu-1:2Gi/60"}}},
			{pod: makePod(app("main", 2)), want: [][]string{{"gpu-0:2Gi"}}},
		}},
		{"init and app containers: a claim each", []testCard{card16}, []step{
			{pod: makePod(initApp("warm", 2), app("main", 6)), want: [][]string{{"gpu-0:2Gi"}, {"gpu-0:6Gi"}}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := newNode(tt.cards...)
			for i, s := range tt.steps {
				s.pod.Name = "p" + strconv.Itoa(i)
				if diff := cmp.Diff(s.want, n.allocate(t, s.pod)); diff != "" {
					t.Errorf("pod %d: devices (-want,+got):\n%s", i, diff)
				}
			}
		})
	}
}
