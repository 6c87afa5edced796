package dra

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// claimPod is pod "pod-<claim>" (the consumer makeClaim reserves claim for) whose pod claims
// and containers are given: podClaims maps a pod claim's name to the ResourceClaim it names
// ("tmpl:<claim>" for one made from a template, recorded in the pod's status), and containers
// maps each container, "init:" prefixed for an init container, to the pod claims it uses.
func claimPod(claim string, podClaims map[string]string, containers map[string][]string) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pod-" + claim, Namespace: "default", UID: types.UID("pod-uid-" + claim)}}
	for entry, target := range podClaims {
		if name, ok := strings.CutPrefix(target, "tmpl:"); ok {
			p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, v1.PodResourceClaim{Name: entry, ResourceClaimTemplateName: ptr.To("t")})
			p.Status.ResourceClaimStatuses = append(p.Status.ResourceClaimStatuses, v1.PodResourceClaimStatus{Name: entry, ResourceClaimName: ptr.To(name)})
			continue
		}
		p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, v1.PodResourceClaim{Name: entry, ResourceClaimName: ptr.To(target)})
	}
	for name, uses := range containers {
		c := v1.Container{Name: name}
		for _, u := range uses {
			c.Resources.Claims = append(c.Resources.Claims, v1.ResourceClaim{Name: u})
		}
		if n, ok := strings.CutPrefix(name, "init:"); ok {
			c.Name = n
			p.Spec.InitContainers = append(p.Spec.InitContainers, c)
			continue
		}
		p.Spec.Containers = append(p.Spec.Containers, c)
	}
	return p
}

// TestContainerShares: each container that references a prepared claim, through the claim's
// name or the template it was made from, init containers included, holds the claim's share of
// each of its cards; containers that reference no claim of the driver, pods the driver did not
// prepare for, and claims of a pod not on the list hold nothing.
func TestContainerShares(t *testing.T) {
	tests := []struct {
		name       string
		podClaims  map[string]string
		containers map[string][]string
		want       []string // container card bytes
	}{
		{
			name:       "the webhook's shape: a claim per container, from a template",
			podClaims:  map[string]string{"gpu-main": "tmpl:c", "gpu-side": "tmpl:other"},
			containers: map[string][]string{"main": {"gpu-main"}, "side": {"gpu-side"}, "plain": nil},
			want:       []string{"main gpu-1 4GiB", "main gpu-3 2GiB"},
		},
		{
			name:       "a claim by name, shared by a container and an init container",
			podClaims:  map[string]string{"gpu": "c"},
			containers: map[string][]string{"main": {"gpu"}, "init:warmup": {"gpu"}},
			want:       []string{"main gpu-1 4GiB", "main gpu-3 2GiB", "warmup gpu-1 4GiB", "warmup gpu-3 2GiB"},
		},
		{
			name:       "a pod claim naming another claim",
			podClaims:  map[string]string{"gpu": "not-prepared"},
			containers: map[string][]string{"main": {"gpu"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			td := newTestDriver(t, testConfig(t, t.TempDir()), testHost(t))
			td.mustPrepare(t, makeClaim("c").device(deviceName(1), 4*gib, 0).device(deviceName(3), 2*gib, 0).obj(),
				makeClaim("gone").device(deviceName(0), gib, 0).obj())
			pod := claimPod("c", tt.podClaims, tt.containers)
			var got []string
			for _, l := range td.ContainerShares([]*v1.Pod{pod}) {
				if l.Namespace != pod.Namespace || l.Pod != pod.Name || l.PodUID != pod.UID {
					t.Errorf("share %+v: want pod %s/%s (%s)", l, pod.Namespace, pod.Name, pod.UID)
				}
				got = append(got, l.Container+" "+deviceName(td.cards.list[td.cards.byUUID[l.UUID]].Index)+" "+fmt.Sprintf("%dGiB", l.Bytes>>30))
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("shares (-want,+got):\n%s", diff)
			}
		})
	}
}
