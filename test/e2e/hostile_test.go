package e2e

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/test/e2e/framework"
)

// memoryKiB reads a field of /proc/<pid>/status in KiB (VmRSS: now; VmHWM: the peak).
func memoryKiB(t *testing.T, pid int, field string) int64 {
	t.Helper()
	n, err := framework.MemoryKiB(pid, field)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestHostileInputs sends what a hostile tenant, node or caller could, while 200 ordinary pods
// are scheduled: a node claiming a billion GPUs, a pod whose model annotation lists 20,000
// models (130 KB), and bodies of 16 MiB of node names from an authenticated client. Each is
// refused with a clear error; the ordinary pods all bind; the extender stays ready. It logs the
// extender's resident memory (the note's numbers come from here).
func TestHostileInputs(t *testing.T) {
	e := newEnv(t)
	cards := burstCluster()
	e.nodes(cards)
	pid := e.ext.Proc.PID()
	t.Logf("extender RSS at start: %d MiB", memoryKiB(t, pid, "VmRSS")/1024)

	liar := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "liar", Labels: map[string]string{"kubernetes.io/hostname": "liar"}}}
	err := e.c.AddReadyNode(e.ctx, liar, v1.ResourceList{
		v1.ResourceCPU: resource.MustParse("64"), v1.ResourceMemory: resource.MustParse("256Gi"), v1.ResourcePods: resource.MustParse("110"),
		contract.DefaultResourceName: resource.MustParse("1e9"), contract.DefaultCountName: resource.MustParse("1e9"),
	})
	if err != nil {
		t.Fatal(err)
	}
	var logLine string
	err = poll(e.ctx, 30*time.Second, func() (bool, error) {
		raw, err := os.ReadFile(e.ext.Proc.LogPath)
		for _, line := range strings.Split(string(raw), "\n") {
			if strings.Contains(line, `node="liar"`) && strings.Contains(line, "GPU inventory refused") {
				logLine = line
				return true, nil
			}
		}
		return false, err
	})
	if err != nil || !strings.Contains(logLine, "at most 64 GPUs per node are accepted") {
		t.Fatalf("the extender did not refuse node liar's 10^9 GPUs (%v): %q", err, logLine)
	}
	var inv inspectJSON
	if err := e.ext.GetJSON(e.ctx, framework.ExtenderPrefix+"/inspect", &inv); err != nil {
		t.Fatal(err)
	}
	for _, n := range inv.Nodes {
		if n.Name == "liar" && len(n.GPUs) != 0 {
			t.Fatalf("node liar, claiming 10^9 GPUs, got %d cards in the extender", len(n.GPUs))
		}
	}
	t.Logf("node claiming 10^9 GPUs: no cards; extender RSS %d MiB", memoryKiB(t, pid, "VmRSS")/1024)

	if err := e.c.EnsureNamespace(e.ctx, "hostile"); err != nil {
		t.Fatal(err)
	}
	models := make([]string, 20000)
	for i := range models {
		models[i] = fmt.Sprintf("m%05d", i)
	}
	hostile := e.gpuPod("many-models", 4)
	hostile.Namespace = "hostile"
	hostile.Annotations = map[string]string{contract.DefaultModelKey: strings.Join(models, "|")}
	created := time.Now()
	if _, err := e.c.Client.CoreV1().Pods("hostile").Create(e.ctx, hostile, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.createBurst("ordinary", 0, 200)
	var reason string
	err = poll(e.ctx, time.Minute, func() (bool, error) {
		list, err := e.c.Client.CoreV1().Events("hostile").List(e.ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, ev := range list.Items {
			if ev.InvolvedObject.Name == "many-models" && ev.Reason == "FailedScheduling" {
				reason = ev.Message
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil || !strings.Contains(reason, "at most 32 entries of 64 bytes each are accepted") {
		t.Fatalf("the 130 KB model annotation: event %q (%v), want the model limit explained", reason, err)
	}
	t.Logf("pod with 20,000 models refused %.1f s after its creation: %.200s", time.Since(created).Seconds(), reason)
	e.waitAllBound(200, 3*time.Minute)

	// Bodies of 16 MiB of names, six at once, from a client with a certificate.
	var names bytes.Buffer
	names.WriteString(`{"Pod":null,"NodeNames":[`)
	for i := 0; names.Len() < 16<<20-64; i++ {
		if i > 0 {
			names.WriteByte(',')
		}
		fmt.Fprintf(&names, `"n%07d"`, i)
	}
	names.WriteString(`]}`)
	body := names.Bytes()
	statuses := map[int]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range 6 {
		wg.Go(func() {
			req, err := http.NewRequestWithContext(e.ctx, http.MethodPost, e.ext.URL()+framework.ExtenderPrefix+"/filter", bytes.NewReader(body))
			if err != nil {
				t.Error(err)
				return
			}
			resp, err := e.ext.Client.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			_ = resp.Body.Close()
			mu.Lock()
			statuses[resp.StatusCode]++
			mu.Unlock()
		})
	}
	wg.Wait()
	for status := range statuses {
		if status != http.StatusBadRequest && status != http.StatusServiceUnavailable && status != http.StatusRequestEntityTooLarge {
			t.Errorf("a 16 MiB body of names was answered %d; want 400 (too many names), 413 or 503 (busy)", status)
		}
	}
	t.Logf("six %d-byte bodies of names at once: answers %v; extender RSS %d MiB, peak %d MiB",
		len(body), statuses, memoryKiB(t, pid, "VmRSS")/1024, memoryKiB(t, pid, "VmHWM")/1024)
	var ready map[string]string
	if err := e.ext.GetJSON(e.ctx, "/readyz", &ready); err != nil {
		t.Fatalf("extender not ready after the hostile inputs: %v", err)
	}
	e.checkConsistent(cards)
}
