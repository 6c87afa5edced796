package e2e

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/test/e2e/framework"
)

// burstCluster is 20 nodes: ten with 2 x 16 GiB T4s, ten with 4 x 8 GiB cards (640 units).
func burstCluster() map[string][]contract.GPU {
	cards := map[string][]contract.GPU{}
	for i := range 10 {
		n := fmt.Sprintf("t4-%02d", i)
		cards[n] = framework.Cards(n, "Tesla T4", 16, 2)
		n = fmt.Sprintf("p4-%02d", i)
		cards[n] = framework.Cards(n, "Tesla P4", 8, 4)
	}
	return cards
}

// burstUnits is pod i's request: 1, 2, 3, ... (400 units for 200 pods). With requests of at
// most 3 units a card refuses a pod only when it has at most 2 units free, so at most
// 60 cards x 2 = 120 units can be stranded: 640 - 120 >= 400, every pod must fit.
func burstUnits(i int) int64 { return int64(i%3 + 1) }

// createBurst creates pods [from, to) from 16 goroutines. A create that fails (the API server
// down or restarting) is retried for up to 3 minutes; AlreadyExists on a retry means an earlier
// attempt landed.
func (e *env) createBurst(prefix string, from, to int) {
	e.t.Helper()
	var wg sync.WaitGroup
	var failed atomic.Value
	next := make(chan int)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				pod := e.gpuPod(fmt.Sprintf("%s-%03d", prefix, i), burstUnits(i))
				if err := e.createRetrying(pod, 3*time.Minute); err != nil {
					failed.Store(err)
				}
			}
		}()
	}
	for i := from; i < to; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		e.t.Fatalf("create pods: %v", err)
	}
}

// createRetrying creates pod, retrying failures other than a refusal of the pod itself every
// 200 ms for up to timeout.
func (e *env) createRetrying(pod *v1.Pod, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		_, err := e.c.Client.CoreV1().Pods(pod.Namespace).Create(e.ctx, pod, metav1.CreateOptions{})
		if err == nil || apierrors.IsAlreadyExists(err) {
			return nil
		}
		if apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) || apierrors.IsForbidden(err) ||
			time.Now().After(deadline) || e.ctx.Err() != nil {
			return fmt.Errorf("create pod %s: %w", pod.Name, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// countBound returns how many pods are bound and how many exist.
func (e *env) countBound() (bound, total int, err error) {
	list, err := e.c.Client.CoreV1().Pods("default").List(e.ctx, metav1.ListOptions{})
	if err != nil {
		return 0, 0, err
	}
	for _, p := range list.Items {
		if p.Spec.NodeName != "" {
			bound++
		}
	}
	return bound, len(list.Items), nil
}

// waitAllBound waits until all n pods are bound and logs the time it took.
func (e *env) waitAllBound(n int, timeout time.Duration) {
	e.t.Helper()
	t0 := time.Now()
	var bound int
	err := poll(e.ctx, timeout, func() (bool, error) {
		b, total, err := e.countBound()
		bound = b
		return err == nil && b == n && total == n, err
	})
	if err != nil {
		e.t.Fatalf("%d of %d pods bound: %v", bound, n, err)
	}
	e.t.Logf("all %d pods bound %.1f s after the burst", n, time.Since(t0).Seconds())
}

// TestBurst200 creates 200 pods at once over 20 nodes: all must be bound, no card over
// capacity, and the pods' annotations must equal the extender's cache.
func TestBurst200(t *testing.T) {
	e := newEnv(t)
	cards := burstCluster()
	e.nodes(cards)
	t0 := time.Now()
	e.createBurst("burst", 0, 200)
	t.Logf("200 pods created in %.1f s", time.Since(t0).Seconds())
	e.waitAllBound(200, 3*time.Minute)
	e.checkConsistent(cards)
}

// pollFast polls every 10 ms, to act while a burst is still being bound.
func (e *env) pollFast(timeout time.Duration, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := cond()
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %v (last error: %v)", timeout, err) //nolint:errorlint // err may be nil; %w would print %!w(<nil>).
		}
		time.Sleep(10 * time.Millisecond)
	}
}
