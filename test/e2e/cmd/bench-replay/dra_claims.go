package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/dra"
	"github.com/gpushare/gpushare/pkg/draconvert"
	"github.com/gpushare/gpushare/test/e2e/framework"
)

// draCheck is what the end of a DRA replay found on the API server.
type draCheck struct {
	// capacity is the check per card: the memory and cores its allocated claims consumed
	// against what its device publishes.
	capacity framework.DRACapacityCheck
	// claims is the check per bound pod: its claims against its ask.
	claims claimCheck
	// placedBytes is the memory the placed pods asked, as the submitter counted them.
	placedBytes int64
}

// ok is true when no card is over capacity, every bound pod's claims hold what it asked, and
// the claims consumed in all exactly what the placed pods asked.
func (c draCheck) ok() bool {
	return c.capacity.OK() && len(c.claims.problems) == 0 &&
		c.capacity.ConsumedBytes == c.placedBytes && c.claims.bytes == c.placedBytes
}

func (c draCheck) String() string {
	return fmt.Sprintf("%s; %d bound GPU pods, %d problems with their claims %v; claims consumed %d bytes, bound pods' claims %d, placed pods asked %d",
		c.capacity, c.claims.pods, len(c.claims.problems), c.claims.problems, c.capacity.ConsumedBytes, c.claims.bytes, c.placedBytes)
}

// checkDRA reads the slices, claims and pods and checks them (draCheck).
func (p *production) checkDRA(ctx context.Context) (draCheck, error) {
	check := draCheck{placedBytes: p.placedUnits * p.names.UnitBytes()}
	var err error
	if check.capacity, err = p.cluster.CheckDRACapacity(ctx, draDriver); err != nil {
		return check, err
	}
	pods, err := p.cluster.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return check, fmt.Errorf("list pods: %w", err)
	}
	claims, err := p.cluster.Client.ResourceV1().ResourceClaims(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return check, fmt.Errorf("list ResourceClaims: %w", err)
	}
	check.claims = checkClaims(pods.Items, claims.Items, &p.names, draDriver)
	return check, nil
}

// claimCheck is what the claims of the bound pods say.
type claimCheck struct {
	// pods counts the bound pods whose gpu-mem asks were converted; bytes is the memory their
	// claims consumed.
	pods  int
	bytes int64
	// problems lists what is wrong, sorted: a converted container of a bound pod whose claim is
	// missing, not allocated, not reserved for the pod, off the pod's node, not on as many
	// distinct cards as it asked, or holding other than its ask on each; an allocated claim
	// that no bound pod uses.
	problems []string
}

// checkClaims checks each bound pod of pods with converted gpu-mem asks
// (draconvert.AnnotationConverted) against its claims of driver in claims.
func checkClaims(pods []v1.Pod, claims []resourcev1.ResourceClaim, names *contract.Names, driver string) claimCheck {
	byName := make(map[string]*resourcev1.ResourceClaim, len(claims))
	for i := range claims {
		byName[claims[i].Name] = &claims[i]
	}
	var cc claimCheck
	used := map[string]bool{}
	for i := range pods {
		pod := &pods[i]
		raw, converted := pod.Annotations[draconvert.AnnotationConverted]
		if pod.Spec.NodeName == "" || pod.DeletionTimestamp != nil || !converted {
			continue
		}
		cc.pods++
		for _, name := range cc.checkPod(pod, raw, byName, names, driver) {
			used[name] = true
		}
	}
	for i := range claims {
		if c := &claims[i]; c.Status.Allocation != nil && !used[c.Name] {
			cc.problems = append(cc.problems, fmt.Sprintf("claim %s is allocated, but no bound pod uses it", c.Name))
		}
	}
	sort.Strings(cc.problems)
	return cc
}

// checkPod checks the claim of each converted container of pod, whose annotation raw says what
// each asked, and returns the names of the claims it found.
func (cc *claimCheck) checkPod(pod *v1.Pod, raw string, byName map[string]*resourcev1.ResourceClaim, names *contract.Names, driver string) []string {
	var asked map[string]int64
	if err := json.Unmarshal([]byte(raw), &asked); err != nil {
		cc.problems = append(cc.problems, fmt.Sprintf("pod %s: annotation %s: %v", pod.Name, draconvert.AnnotationConverted, err))
		return nil
	}
	gpus := 1
	if v, ok := pod.Annotations[names.GPUCountAnnotation]; ok {
		gpus, _ = strconv.Atoi(v) // a bad count finds no claim of that many cards below
	}
	claimOf := map[string]string{} // the pod's claim name → the ResourceClaim's
	for _, s := range pod.Status.ResourceClaimStatuses {
		if s.ResourceClaimName != nil {
			claimOf[s.Name] = *s.ResourceClaimName
		}
	}
	var found []string
	for _, ctr := range slices.Concat(pod.Spec.InitContainers, pod.Spec.Containers) {
		units, ok := asked[ctr.Name]
		if !ok {
			continue
		}
		claim := byName[claimOf[containerClaim(&ctr)]]
		if claim == nil {
			cc.problems = append(cc.problems, fmt.Sprintf("pod %s container %s: no ResourceClaim", pod.Name, ctr.Name))
			continue
		}
		found = append(found, claim.Name)
		consumed, problem := consumedBy(claim, pod, gpus, units*names.UnitBytes(), driver)
		if problem != "" {
			cc.problems = append(cc.problems, fmt.Sprintf("pod %s container %s claim %s: %s", pod.Name, ctr.Name, claim.Name, problem))
		}
		cc.bytes += consumed
	}
	return found
}

// containerClaim is the name of the pod claim the conversion gave ctr ("" when none).
func containerClaim(ctr *v1.Container) string {
	for _, rc := range ctr.Resources.Claims {
		if strings.HasPrefix(rc.Name, draconvert.ClaimPrefix) {
			return rc.Name
		}
	}
	return ""
}

// consumedBy is the memory claim consumed on driver's devices and, when it is not what pod
// asked (askedBytes over gpus distinct cards of its node, an even share on each, the claim
// reserved for it), why.
func consumedBy(claim *resourcev1.ResourceClaim, pod *v1.Pod, gpus int, askedBytes int64, driver string) (int64, string) {
	a := claim.Status.Allocation
	if a == nil {
		return 0, "not allocated"
	}
	var consumed int64
	cards := map[string]bool{}
	var problems []string
	for _, r := range a.Devices.Results {
		if r.Driver != driver {
			continue
		}
		cards[r.Pool+"/"+r.Device] = true
		mem := r.ConsumedCapacity[dra.CapacityMemory]
		consumed += mem.Value()
		if r.Pool != pod.Spec.NodeName {
			problems = append(problems, fmt.Sprintf("device %s/%s is not on the pod's node %s", r.Pool, r.Device, pod.Spec.NodeName))
		}
		if gpus > 0 && mem.Value() != askedBytes/int64(gpus) {
			problems = append(problems, fmt.Sprintf("device %s/%s holds %d bytes, want %d", r.Pool, r.Device, mem.Value(), askedBytes/int64(gpus)))
		}
	}
	if len(cards) != gpus {
		problems = append(problems, fmt.Sprintf("on %d distinct cards, want %d", len(cards), gpus))
	}
	if !slices.ContainsFunc(claim.Status.ReservedFor, func(r resourcev1.ResourceClaimConsumerReference) bool { return r.UID == pod.UID }) {
		problems = append(problems, "not reserved for the pod")
	}
	return consumed, strings.Join(problems, "; ")
}
