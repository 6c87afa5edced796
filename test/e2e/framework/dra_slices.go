package framework

import (
	"context"
	"fmt"
	"strconv"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/dra"
)

// DRACard is one GPU as a node without a driver behind it publishes it in DRA mode.
type DRACard struct {
	// Index is the card's NVML index; its device is named "gpu-<Index>".
	Index int
	// UUID and Model are its attributes.
	UUID, Model string
	// CapacityBytes is the memory claims can consume of it, a whole number of units.
	CapacityBytes int64
}

// DRADevice is card's device as share-plugin --mode=dra publishes it (pkg/dra, slice.go) on a
// card that is healthy and whose PCI placement and NVLink peers are unknown: attributes uuid,
// model and index; consumable memory (bytes, requests in multiples of unitBytes from one unit
// to the card, the whole card by default) and cores (0-100, none by default); any number of
// claims at once. pkg/dra builds it from unexported state (the cards NVML reported), so the
// shape is repeated here; TestDRADeviceShape pins it.
func DRADevice(card DRACard, unitBytes int64) resourceapi.Device {
	model := card.Model
	if len(model) > resourceapi.DeviceAttributeMaxValueLength {
		model = model[:resourceapi.DeviceAttributeMaxValueLength]
	}
	memory := &resourceapi.CapacityRequestPolicyRange{Min: bytesQuantity(unitBytes), Max: bytesQuantity(card.CapacityBytes)}
	if card.CapacityBytes >= 2*unitBytes { // min + step must stay within the capacity
		memory.Step = bytesQuantity(unitBytes)
	}
	cores := func(n int64) *resource.Quantity { return resource.NewQuantity(n, resource.DecimalSI) }
	return resourceapi.Device{
		Name: "gpu-" + strconv.Itoa(card.Index),
		Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
			dra.AttrUUID:  {StringValue: ptr.To(card.UUID)},
			dra.AttrModel: {StringValue: ptr.To(model)},
			dra.AttrIndex: {IntValue: ptr.To(int64(card.Index))},
		},
		Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
			dra.CapacityMemory: {Value: *bytesQuantity(card.CapacityBytes),
				RequestPolicy: &resourceapi.CapacityRequestPolicy{Default: bytesQuantity(card.CapacityBytes), ValidRange: memory}},
			dra.CapacityCores: {Value: *cores(contract.MaxCorePercent),
				RequestPolicy: &resourceapi.CapacityRequestPolicy{Default: cores(0),
					ValidRange: &resourceapi.CapacityRequestPolicyRange{Min: cores(0), Max: cores(contract.MaxCorePercent), Step: cores(1)}}},
		},
		AllowMultipleAllocations: ptr.To(true),
	}
}

// DRASlice is node's ResourceSlice as share-plugin --mode=dra publishes it with driver's
// name: one pool named after the node, of one slice, with one device per card in the order
// given (the driver's index order: by NVML index).
func DRASlice(driver, node string, cards []DRACard, unitBytes int64) *resourceapi.ResourceSlice {
	devices := make([]resourceapi.Device, 0, len(cards))
	for _, c := range cards {
		devices = append(devices, DRADevice(c, unitBytes))
	}
	return &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: node + "-" + driver},
		Spec: resourceapi.ResourceSliceSpec{
			Driver:   driver,
			Pool:     resourceapi.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1},
			NodeName: ptr.To(node),
			Devices:  devices,
		},
	}
}

// PublishDRASlice creates slice, as the kubelet plugin of its node would.
func (c *Cluster) PublishDRASlice(ctx context.Context, slice *resourceapi.ResourceSlice) error {
	if _, err := c.Client.ResourceV1().ResourceSlices().Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create ResourceSlice %s: %w", slice.Name, err)
	}
	return nil
}

// bytesQuantity is a binary quantity of n bytes.
func bytesQuantity(n int64) *resource.Quantity { return resource.NewQuantity(n, resource.BinarySI) }
