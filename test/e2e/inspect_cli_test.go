package e2e

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/test/e2e/framework"
)

// inspectCLI is the part of `kubectl inspect gpushare -o json` the test compares.
type inspectCLI struct {
	Kind  string `json:"kind"`
	Nodes []struct {
		Name string `json:"name"`
		GPUs []struct {
			Index     int    `json:"index"`
			UUID      string `json:"uuid"`
			Allocated int64  `json:"allocated"`
			Total     int64  `json:"total"`
		} `json:"gpus"`
		Allocated int64 `json:"allocated"`
		Total     int64 `json:"total"`
		Pods      []struct {
			Namespace string `json:"namespace"`
			Name      string `json:"name"`
		} `json:"pods"`
	} `json:"nodes"`
	Cluster struct {
		Allocated int64 `json:"allocated"`
		Total     int64 `json:"total"`
	} `json:"cluster"`
}

// TestInspectCLI runs `kubectl inspect gpushare` (our plugin found on PATH by the real kubectl)
// against a scheduled cluster: -o json, the default table and -d must show what the pods'
// annotations and the nodes' cards say.
func TestInspectCLI(t *testing.T) {
	e := newEnv(t)
	cards := map[string][]contract.GPU{
		"node-a": framework.Cards("node-a", "Tesla T4", 16, 2),
		"node-b": framework.Cards("node-b", "Tesla P4", 8, 4),
		"node-c": framework.Cards("node-c", "Tesla V100-SXM2-32GB", 32, 1),
	}
	e.nodes(cards)
	for i := range 12 {
		e.create(e.gpuPod(fmt.Sprintf("job-%02d", i), int64(i%5+1)))
	}
	e.waitAllBound(12, time.Minute)
	e.checkConsistent(cards)
	api, pods, err := e.apiUsage()
	if err != nil {
		t.Fatal(err)
	}

	out, err := e.kubectl("inspect", "gpushare", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var got inspectCLI
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("decode -o json: %v\n%s", err, out)
	}
	if want, have := cardTable(api, cards), cliCardTable(got); want != have {
		t.Errorf("-o json cards differ from the cluster\nwant:\n%s\ngot:\n%s", want, have)
	}
	var allocated, total int64
	for _, gpus := range cards {
		for _, g := range gpus {
			total += g.Units
			allocated += api[nodeOf(cards, g)][g.Index]
		}
	}
	if got.Cluster.Allocated != allocated || got.Cluster.Total != total {
		t.Errorf("-o json cluster %d/%d, want %d/%d", got.Cluster.Allocated, got.Cluster.Total, allocated, total)
	}

	table, err := e.kubectl("inspect", "gpushare")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kubectl inspect gpushare:\n%s", table)
	wantLine := fmt.Sprintf("Allocated/Total GPU Memory In Cluster: %d/%d (%d%%)", allocated, total, allocated*100/total)
	if !strings.Contains(table, wantLine) {
		t.Errorf("default view lacks %q", wantLine)
	}
	for node, gpus := range cards {
		row := rowOf(table, node)
		for _, g := range gpus {
			cell := fmt.Sprintf("%d/%d", api[node][g.Index], g.Units)
			if !containsField(row, cell) {
				t.Errorf("row of %s %q lacks GPU%d cell %s", node, row, g.Index, cell)
			}
		}
	}

	details, err := e.kubectl("inspect", "gpushare", "-d", "node-a")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kubectl inspect gpushare -d node-a:\n%s", details)
	for _, p := range pods {
		listed := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(p.Name) + `\s`).MatchString(details)
		if listed != (p.Spec.NodeName == "node-a") {
			t.Errorf("pod %s on %s: listed in -d node-a = %v", p.Name, p.Spec.NodeName, listed)
		}
	}
}

func nodeOf(cards map[string][]contract.GPU, g contract.GPU) string {
	for n, gpus := range cards {
		for _, x := range gpus {
			if x.UUID == g.UUID {
				return n
			}
		}
	}
	return ""
}

// cardTable renders "node GPUi used/total uuid" lines for every card.
func cardTable(u usage, cards map[string][]contract.GPU) string {
	var lines []string
	for n, gpus := range cards {
		for _, g := range gpus {
			lines = append(lines, fmt.Sprintf("%s GPU%d %d/%d %s", n, g.Index, u[n][g.Index], g.Units, g.UUID))
		}
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func cliCardTable(in inspectCLI) string {
	var lines []string
	for _, n := range in.Nodes {
		for _, g := range n.GPUs {
			lines = append(lines, fmt.Sprintf("%s GPU%d %d/%d %s", n.Name, g.Index, g.Allocated, g.Total, g.UUID))
		}
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func rowOf(table, node string) string {
	for _, line := range strings.Split(table, "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == node {
			return line
		}
	}
	return ""
}

func containsField(row, cell string) bool {
	for _, f := range strings.Fields(row) {
		if f == cell || strings.HasPrefix(f, cell+"(") {
			return true
		}
	}
	return false
}
