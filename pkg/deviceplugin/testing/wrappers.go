// Package testing builds pods for the device plugin's tests, in the style of kubernetes'
// pkg/scheduler/testing wrappers.
package testing

import (
	"encoding/json"
	"strconv"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpushare/gpushare/pkg/contract"
)

// PodWrapper builds a pod.
type PodWrapper struct{ v1.Pod }

// MakePod starts a pod in namespace "default".
func MakePod() *PodWrapper {
	return &PodWrapper{v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Annotations: map[string]string{}}}}
}

// Name sets the name and a UID derived from it.
func (w *PodWrapper) Name(n string) *PodWrapper {
	w.ObjectMeta.Name, w.UID = n, types.UID("uid-"+n)
	return w
}

// Node binds the pod.
func (w *PodWrapper) Node(n string) *PodWrapper { w.Spec.NodeName = n; return w }

// Created sets the creation time.
func (w *PodWrapper) Created(t time.Time) *PodWrapper {
	w.CreationTimestamp = metav1.NewTime(t)
	return w
}

// Container adds an app container asking units of gpu-mem (none when units is 0).
func (w *PodWrapper) Container(name string, units int64) *PodWrapper {
	w.Spec.Containers = append(w.Spec.Containers, container(name, units))
	return w
}

// InitContainer adds an init container asking units of gpu-mem.
func (w *PodWrapper) InitContainer(name string, units int64) *PodWrapper {
	w.Spec.InitContainers = append(w.Spec.InitContainers, container(name, units))
	return w
}

// Annotation sets an annotation.
func (w *PodWrapper) Annotation(k, v string) *PodWrapper { w.Annotations[k] = v; return w }

// Placement writes the extender's annotations for alloc (key → GPU index → units).
func (w *PodWrapper) Placement(alloc contract.Allocation) *PodWrapper {
	raw, _ := json.Marshal(alloc)
	w.Annotations[contract.AnnotationAllocation] = string(raw)
	w.Annotations[contract.AnnotationIndex] = strconv.Itoa(alloc.GPUs()[0])
	w.Annotations[contract.AnnotationAssigned] = "false"
	return w
}

// Obj returns the pod.
func (w *PodWrapper) Obj() *v1.Pod { return w.DeepCopy() }

func container(name string, units int64) v1.Container {
	c := v1.Container{Name: name}
	if units > 0 {
		q := *resource.NewQuantity(units, resource.DecimalSI)
		c.Resources.Limits = v1.ResourceList{contract.DefaultResourceName: q}
	}
	return c
}
