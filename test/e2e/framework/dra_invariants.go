package framework

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/dra"
)

// hamiLimitEnv starts the name of HAMi-core's per-card limit, CUDA_DEVICE_MEMORY_LIMIT_<i>,
// where i counts the cards of NVIDIA_VISIBLE_DEVICES.
const hamiLimitEnv = "CUDA_DEVICE_MEMORY_LIMIT_"

// DRACardMemory is one card of a real node in DRA mode as DRAInvariants sees it: what its
// device publishes, what the allocated claims consumed of it, and the limits the prepared
// claims were handed on it.
type DRACardMemory struct {
	// Device is the device's name in the node's pool, e.g. gpu-0.
	Device string
	UUID   string
	// CapacityBytes is the device's published memory capacity.
	CapacityBytes int64
	// ConsumedBytes adds up status.allocation's consumedCapacity.memory of the allocated claims.
	ConsumedBytes int64
	// LimitBytes adds up the CUDA_DEVICE_MEMORY_LIMIT_<i> of the driver's CDI specs for it.
	LimitBytes int64
}

// DRAInvariants is the end-of-test check of DRA mode on a real node: the capacity check of
// every card of the driver (DRACapacityCheck: memory and cores consumed within what each card
// publishes, every result metered and on a published device), and on the node, per card, the
// memory the allocated claims consumed equal to the limits handed out (HAMi-core's, in the
// prepared claims' CDI specs), and so each claim's.
type DRAInvariants struct {
	// Cards are the node's published cards, in published order.
	Cards []DRACardMemory
	// Capacity is the capacity check of the driver's cards (DRACapacityOf).
	Capacity DRACapacityCheck
	// Mismatched lists the cards whose consumed memory is not the limits handed out, and the
	// claims whose consumption is not their own limits (a claim allocated but not prepared, a
	// spec without a claim, a card without a limit, another amount).
	Mismatched []string
}

// OK is true when nothing is wrong.
func (i DRAInvariants) OK() bool { return i.Capacity.OK() && len(i.Mismatched) == 0 }

func (i DRAInvariants) String() string {
	cards := make([]string, len(i.Cards))
	for k, c := range i.Cards {
		cards[k] = fmt.Sprintf("%s: %d MiB consumed, %d MiB limits, of %d MiB", c.Device, c.ConsumedBytes>>20, c.LimitBytes>>20, c.CapacityBytes>>20)
	}
	return fmt.Sprintf("%s; %d mismatches between consumed memory and limits %v; cards [%s]",
		i.Capacity, len(i.Mismatched), i.Mismatched, strings.Join(cards, "; "))
}

// draMemory is memory in bytes by card UUID.
type draMemory map[string]int64

// CheckDRAInvariants reads the driver's published cards and every allocated claim from the API
// server, and the limits the driver handed out on node from its CDI specs in cdiDir, and checks
// them (DRAInvariants).
func (c *Cluster) CheckDRAInvariants(ctx context.Context, node, cdiDir string) (DRAInvariants, error) {
	var inv DRAInvariants
	var err error
	if inv.Capacity, err = c.CheckDRACapacity(ctx, dra.DefaultDriverName); err != nil {
		return inv, err
	}
	devices, err := c.DRADevices(ctx, node)
	if err != nil {
		return inv, err
	}
	uuids := make(map[string]string, len(devices))
	for k := range devices {
		uuids[devices[k].Name] = DRAAttribute(&devices[k], dra.AttrUUID)
	}
	consumed, err := c.draConsumed(ctx, node, uuids)
	if err != nil {
		return inv, err
	}
	limits, err := draLimits(cdiDir)
	if err != nil {
		return inv, err
	}
	cardConsumed, cardLimits := byCard(consumed), byCard(limits)
	for k := range devices {
		d := &devices[k]
		mem := d.Capacity[dra.CapacityMemory].Value
		card := DRACardMemory{Device: d.Name, UUID: uuids[d.Name], CapacityBytes: mem.Value()}
		card.ConsumedBytes, card.LimitBytes = cardConsumed[card.UUID], cardLimits[card.UUID]
		if card.ConsumedBytes != card.LimitBytes {
			inv.Mismatched = append(inv.Mismatched, fmt.Sprintf("card %s: %d bytes consumed, %d bytes of limits", d.Name, card.ConsumedBytes, card.LimitBytes))
		}
		inv.Cards = append(inv.Cards, card)
	}
	for _, claim := range slices.Sorted(maps.Keys(consumed)) {
		if !maps.Equal(consumed[claim], limits[claim]) {
			inv.Mismatched = append(inv.Mismatched, fmt.Sprintf("claim %s: consumed %v, limits %v (bytes by card UUID)", claim, consumed[claim], limits[claim]))
		}
	}
	for _, claim := range slices.Sorted(maps.Keys(limits)) {
		if _, ok := consumed[claim]; !ok {
			inv.Mismatched = append(inv.Mismatched, fmt.Sprintf("CDI spec of claim %s: limits %v, but no allocated claim of that UID", claim, limits[claim]))
		}
	}
	return inv, nil
}

// byCard adds up memory by claim into memory by card.
func byCard(perClaim map[string]draMemory) draMemory {
	out := draMemory{}
	for _, m := range perClaim {
		for uuid, b := range m {
			out[uuid] += b
		}
	}
	return out
}

// draConsumed returns the memory each allocated claim consumed of the node's cards, by claim
// UID and card UUID (uuids: device name → UUID). A result of the driver on the node that
// records no consumed memory (a scheduler without DRAConsumableCapacity hands out the whole
// card) is an error.
func (c *Cluster) draConsumed(ctx context.Context, node string, uuids map[string]string) (map[string]draMemory, error) {
	claims, err := c.Client.ResourceV1().ResourceClaims(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list ResourceClaims: %w", err)
	}
	out := map[string]draMemory{}
	for k := range claims.Items {
		claim := &claims.Items[k]
		if claim.Status.Allocation == nil {
			continue
		}
		for _, r := range claim.Status.Allocation.Devices.Results {
			if r.Driver != dra.DefaultDriverName || r.Pool != node {
				continue
			}
			q, ok := r.ConsumedCapacity[dra.CapacityMemory]
			if !ok {
				return nil, fmt.Errorf("claim %s/%s: device %s allocated without consumed memory", claim.Namespace, claim.Name, r.Device)
			}
			if out[string(claim.UID)] == nil {
				out[string(claim.UID)] = draMemory{}
			}
			out[string(claim.UID)][uuids[r.Device]] += q.Value()
		}
	}
	return out, nil
}

// draLimits reads the limits the driver handed out from its CDI specs in dir (one per
// prepared claim, its device named after the claim's UID): by claim UID and card UUID.
func draLimits(dir string) (map[string]draMemory, error) {
	paths, err := filepath.Glob(filepath.Join(dir, dra.DefaultDriverName+"_claim_*.json"))
	if err != nil {
		return nil, err
	}
	out := map[string]draMemory{}
	for _, path := range paths {
		raw, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("CDI spec: %w", err)
		}
		var spec CDISpec
		if err := json.Unmarshal(raw, &spec); err != nil {
			return nil, fmt.Errorf("CDI spec %s: %w", path, err)
		}
		for _, d := range spec.Devices {
			m, err := CDILimits(d.ContainerEdits.Env)
			if err != nil {
				return nil, fmt.Errorf("CDI spec %s: %w", path, err)
			}
			out[d.Name] = m
		}
	}
	return out, nil
}

// CDILimits reads the HAMi-core memory limits of a container's environment ("NAME=value"):
// by card UUID of NVIDIA_VISIBLE_DEVICES, the CUDA_DEVICE_MEMORY_LIMIT_<i> of the i-th card,
// in bytes. A card without a limit, or a limit without a card, is an error.
func CDILimits(env []string) (map[string]int64, error) {
	vars := map[string]string{}
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			vars[k] = v
		}
	}
	uuids := strings.Split(vars[contract.EnvVisibleDevices], ",")
	out := map[string]int64{}
	for i, uuid := range uuids {
		v, ok := vars[hamiLimitEnv+strconv.Itoa(i)]
		if !ok || uuid == "" {
			return nil, fmt.Errorf("card %d (%q) of %s has no %s%d", i, uuid, contract.EnvVisibleDevices, hamiLimitEnv, i)
		}
		b, err := hamiBytes(v)
		if err != nil {
			return nil, err
		}
		out[uuid] += b
	}
	if _, extra := vars[hamiLimitEnv+strconv.Itoa(len(uuids))]; extra {
		return nil, fmt.Errorf("%s%d beyond the %d cards of %s", hamiLimitEnv, len(uuids), len(uuids), contract.EnvVisibleDevices)
	}
	return out, nil
}

// hamiBytes reads a HAMi-core memory limit: a number of bytes, or of KiB, MiB or GiB with the
// suffix k, m or g.
func hamiBytes(v string) (int64, error) {
	shift := map[byte]uint{'k': 10, 'm': 20, 'g': 30}
	s, num := uint(0), strings.ToLower(v)
	if n := len(num); n > 0 {
		if sh, ok := shift[num[n-1]]; ok {
			s, num = sh, num[:n-1]
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("HAMi-core limit %q: want a number of bytes, or with k, m or g", v)
	}
	return n << s, nil
}
