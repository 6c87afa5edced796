package main

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"text/tabwriter"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/deviceplugin"
	"github.com/gpushare/gpushare/pkg/deviceplugin/fake"
	"github.com/gpushare/gpushare/pkg/deviceplugin/nvml"
)

// topoSkipNote is the report's line on a machine with one GPU: there is no pair to read, so
// nothing is checked, and nothing is counted as passed.
const topoSkipNote = "SKIP topology: one GPU, no pair of cards to read links between, nothing to check — this is not a pass"

// smiTopology is what nvidia-smi topo -m says: links[i][j] as printed between GPUi and GPUj,
// and each GPU's NUMA Affinity ("" when the column is missing).
type smiTopology struct {
	links [][]string
	numa  []string
}

// checkTopology reads the cards' topology as the share-plugin publishes it (deviceplugin.New
// over this machine's NVML, the plugin's sysfs fallback for NUMA nodes) and checks it: on one
// card it notes a SKIP and checks nothing; on several, that every pair has a link (a
// complete, symmetric matrix) and, when smi is set (nvidia-smi topo -m), that the links and
// NUMA nodes are the ones nvidia-smi prints. The matrix goes to the notes.
func (r *checkRun) checkTopology(ctx context.Context, smi func(ctx context.Context) (string, error)) {
	const name = "topology: the share-plugin reads a link for every pair of cards (real NVML)"
	gpus, err := pluginGPUs(ctx, r.nv)
	if err != nil {
		r.res.add(name, "links published", err.Error(), false)
		return
	}
	if len(gpus) < 2 {
		r.notes = append(r.notes, topoSkipNote)
		return
	}
	want := fmt.Sprintf("a symmetric matrix over %d cards", len(gpus))
	top, err := contract.TopologyOf(gpus)
	switch {
	case err != nil:
		r.res.add(name, want, err.Error(), false)
		return
	case top == nil:
		r.res.add(name, want, "no links published: the plugin could not read them (its log says why)", false)
		return
	}
	r.res.add(name, want, fmt.Sprintf("%d cards", top.Cards()), true)
	r.notes = append(r.notes, "topology as the share-plugin publishes it (NVML; NUMA from NVML, else sysfs):\n"+renderMatrix(gpus))
	if smi == nil {
		r.notes = append(r.notes, "nvidia-smi not found: the links were not compared with nvidia-smi topo -m")
		return
	}
	out, err := smi(ctx)
	if err != nil {
		r.res.add("topology: nvidia-smi topo -m", "runs", err.Error(), false)
		return
	}
	st, err := parseSMITopology(out)
	if err != nil {
		r.res.add("topology: nvidia-smi topo -m", "parses", err.Error(), false)
		return
	}
	r.compareSMI(gpus, st)
}

// compareSMI adds the rows comparing the plugin's links and NUMA nodes with nvidia-smi's.
func (r *checkRun) compareSMI(gpus []contract.GPU, st smiTopology) {
	var diffs []string
	if len(st.links) != len(gpus) {
		diffs = append(diffs, fmt.Sprintf("nvidia-smi shows %d GPUs, the plugin %d", len(st.links), len(gpus)))
	} else {
		for i, g := range gpus {
			ours := strings.Fields(g.Links)
			for j := range gpus {
				theirs := contract.ParseLink(st.links[i][j]).String()
				if i != j && (j >= len(ours) || ours[j] != theirs) {
					diffs = append(diffs, fmt.Sprintf("GPU%d-GPU%d: plugin %s, nvidia-smi %s", gpus[i].Index, gpus[j].Index, tokenAt(ours, j), st.links[i][j]))
				}
			}
		}
	}
	r.res.add("topology: links agree with nvidia-smi topo -m", "the same token for every pair", observed(diffs, "the same"), len(diffs) == 0)
	if st.numa == nil {
		return
	}
	diffs = nil
	for i, g := range gpus {
		if i >= len(st.numa) {
			break
		}
		smiNUMA := st.numa[i]
		if _, err := strconv.Atoi(smiNUMA); err != nil {
			smiNUMA = "-" // N/A
		}
		if ours := numaText(g.NUMA); ours != smiNUMA {
			diffs = append(diffs, fmt.Sprintf("GPU%d: plugin %s, nvidia-smi %s", g.Index, ours, st.numa[i]))
		}
	}
	r.res.add("topology: NUMA nodes agree with nvidia-smi's NUMA Affinity", "the same node per card (N/A: unknown)", observed(diffs, "the same"), len(diffs) == 0)
}

// observed is "same" when there are no differences, else the differences.
func observed(diffs []string, same string) string {
	if len(diffs) == 0 {
		return same
	}
	return strings.Join(diffs, "; ")
}

func tokenAt(toks []string, j int) string {
	if j < len(toks) {
		return toks[j]
	}
	return "(none)"
}

func numaText(n *int) string {
	if n == nil {
		return "-"
	}
	return strconv.Itoa(*n)
}

// pluginGPUs builds the share-plugin over nv (initialized) on a fake API server and returns
// the cards as its node annotation would publish them.
func pluginGPUs(ctx context.Context, nv nvml.Interface) ([]contract.GPU, error) {
	client := k8sfake.NewClientset(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: checkNode}})
	p, err := deviceplugin.New(nv, client, deviceplugin.WithNodeName(checkNode), deviceplugin.WithHealthCheck(false),
		deviceplugin.WithPodSource(fake.ClientPods{Client: client, Node: checkNode}), deviceplugin.WithLogger(klog.FromContext(ctx)))
	if err != nil {
		return nil, fmt.Errorf("share-plugin: %w", err)
	}
	return p.GPUs(), nil
}

// renderMatrix lays the cards' links out as nvidia-smi topo -m does, with a NUMA column.
func renderMatrix(gpus []contract.GPU) string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	head := []string{""}
	for _, g := range gpus {
		head = append(head, "GPU"+strconv.Itoa(g.Index))
	}
	_, _ = fmt.Fprintln(w, strings.Join(append(head, "NUMA"), "\t"))
	for _, g := range gpus {
		row := append([]string{"GPU" + strconv.Itoa(g.Index)}, strings.Fields(g.Links)...)
		_, _ = fmt.Fprintln(w, strings.Join(append(row, numaText(g.NUMA)), "\t"))
	}
	_ = w.Flush()
	return strings.TrimRight(b.String(), "\n")
}

// parseSMITopology reads nvidia-smi topo -m: a tab-separated header naming GPU0..GPUn-1 (and
// NICs, CPU Affinity, NUMA Affinity, ...), then a row per GPU. Rows of NICs and the legend
// are ignored.
func parseSMITopology(out string) (smiTopology, error) {
	ansiEscape := regexp.MustCompile(`\x1b\[[0-9;]*m`) // newer nvidia-smi underlines its header
	var st smiTopology
	var head []string
	gpuCols, numaCol := 0, -1
	for _, line := range strings.Split(ansiEscape.ReplaceAllString(out, ""), "\n") {
		cells := strings.Split(line, "\t")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		switch {
		case head == nil && len(cells) > 1 && cells[0] == "" && strings.HasPrefix(cells[1], "GPU"):
			head = cells
			for _, c := range cells[1:] {
				if strings.HasPrefix(c, "GPU") && !strings.Contains(c, " ") {
					gpuCols++
				}
			}
			for i, c := range cells {
				if c == "NUMA Affinity" {
					numaCol = i
				}
			}
		case head != nil && strings.HasPrefix(cells[0], "GPU") && len(cells) > gpuCols:
			st.links = append(st.links, cells[1:gpuCols+1])
			if numaCol >= 0 && numaCol < len(cells) {
				st.numa = append(st.numa, cells[numaCol])
			}
		}
	}
	if head == nil || len(st.links) != gpuCols {
		return smiTopology{}, fmt.Errorf("no GPU matrix in nvidia-smi topo -m's output (%d rows for %d GPU columns): %q", len(st.links), gpuCols, firstLine(out))
	}
	return st, nil
}

// smiTopologyRunner runs nvidia-smi topo -m; nil when nvidia-smi is not on PATH.
func smiTopologyRunner(h host) func(ctx context.Context) (string, error) {
	smi, err := h.lookPath("nvidia-smi")
	if err != nil {
		return nil
	}
	return func(ctx context.Context) (string, error) {
		out, err := h.run(ctx, smi, "topo", "-m")
		if err != nil {
			return "", fmt.Errorf("nvidia-smi topo -m: %w: %s", err, firstLine(string(out)))
		}
		return string(out), nil
	}
}

// runTopologyOnly is gpucheck -topology-only: the topology check alone, its table and notes;
// exitSkip on one card (nothing checked), else 0 when every check passed.
func runTopologyOnly(ctx context.Context, nv nvml.Interface, smi func(ctx context.Context) (string, error), w io.Writer) int {
	r := &checkRun{nv: nv}
	r.checkTopology(ctx, smi)
	if len(r.res.checks) == 0 {
		for _, n := range r.notes {
			_, _ = fmt.Fprintln(w, n)
		}
		return exitSkip
	}
	return r.render(w)
}
