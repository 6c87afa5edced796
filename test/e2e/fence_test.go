package e2e

import (
	"bufio"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/scheduler/fence"
	"github.com/gpushare/gpushare/pkg/scheduler/server"
	"github.com/gpushare/gpushare/test/e2e/framework"
)

// fenceHoldWrites is how long the leader runs with its API traffic held before it is stopped:
// the Bindings of the binds under way are written, and wait, in the held connections.
const fenceHoldWrites = 300 * time.Millisecond

// TestFenceHeldBindings is issue 38: Bindings a leader built and sent before a pause reach the
// API server after the other replica has taken the Lease and bound on the same cards. Two
// extender replicas run as the extender's service account (config/extender/rbac.yaml and the
// extender's admission policies installed, extender-fence.yaml among them) behind a
// per-request front; the leader reaches kube-apiserver through a HoldingProxy. Mid-burst the
// proxy holds what the leader sends, the leader runs fenceHoldWrites more (its binds under way
// write their Bindings, which wait in the proxy: past its client fence, short of the API
// server) and is stopped (SIGSTOP: it cancels nothing). The follower takes the Lease and binds;
// then the held bytes are released while the leader is still stopped, so the API server gets
// every held Binding, late and whole. The API server must refuse them all at the fence: no pod
// is bound under the old term's token after the release, and the fence policy denied at least
// one request (else nothing was held and the test proved nothing). Every pod is bound once and
// no card is over capacity, by the API's annotations and by both replicas' audits.
func TestFenceHeldBindings(t *testing.T) {
	const pods = pausedFirstWave + pausedSecondWave
	e := newEnvWithoutScheduler(t, "--leader-elect-identity=ext-start")
	e.c.SchedulerConfig = shortExtenderTimeout(t, e.c.Dir)
	e.ext.Proc.Stop(10 * time.Second) // releases the Lease: the replica behind the proxy leads
	e.installFence()
	api, err := url.Parse(e.c.Server())
	if err != nil {
		t.Fatal(err)
	}
	proxy, err := framework.StartHoldingProxy(api.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	leader, follower := e.fencedReplicas(proxy.Host)
	cards := pausedCluster()
	e.nodes(cards)
	prog := e.watchProgress()
	defer prog.Stop()

	start := time.Now()
	wave1 := make(chan struct{})
	go func() { defer close(wave1); e.createBurst("fence", 0, pausedFirstWave) }()
	if err := e.pollFast(3*time.Minute, func() (bool, error) {
		n, _, err := e.countBound()
		return n >= pausedAt, err
	}); err != nil {
		t.Fatalf("burst never got %d pods bound: %v", pausedAt, err)
	}
	oldToken := e.leaseToken()
	denied0 := e.fenceDenials()
	proxy.Hold()
	held := time.Now()
	time.Sleep(fenceHoldWrites)
	// On a slow machine the leader may not have written yet: hold until it has (or 10 s).
	_ = e.pollFast(10*time.Second, func() (bool, error) { return proxy.Waiting() > 0, nil })
	if err := leader.Proc.Pause(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = leader.Proc.Resume() }) // a paused process would not stop on SIGTERM
	heldWrites := proxy.Waiting()

	if err := e.pollFast(40*time.Second, func() (bool, error) { return follower.Leading(e.ctx) }); err != nil {
		t.Fatalf("the follower never took over: %v", err)
	}
	tookOver := time.Since(held)
	if err := poll(e.ctx, 30*time.Second, func() (bool, error) { return e.boundUnder(e.leaseToken()) >= 20, nil }); err != nil {
		t.Fatalf("the new leader bound fewer than 20 pods in 30 s: %v", err)
	}
	newToken := e.leaseToken()
	if newToken == oldToken {
		t.Fatalf("the Lease is still at %s after the takeover", oldToken)
	}
	boundNew := e.boundUnder(newToken)
	// Counted now, not at the hold: a Binding the API server had before the hold may land
	// after it on a slow machine, legitimately; after the takeover only held bytes can land.
	atHold := e.boundUnder(oldToken)
	proxy.Release()
	released := time.Since(held)
	time.Sleep(3 * time.Second) // the API server answers the held requests; the stopped leader cancels none
	denied := e.fenceDenials() - denied0
	late := e.boundUnder(oldToken) - atHold
	if err := leader.Proc.Resume(); err != nil {
		t.Fatal(err)
	}
	t.Logf("held %.1f s into the burst (%d writes held when the leader stopped; %d pods bound under %s before the release); the follower led %.1f s after the hold and had bound %d pods under %s "+
		"when the held bytes were released, %.1f s after the hold; then: %d requests denied by %s, %d pods bound late under the old token",
		held.Sub(start).Seconds(), heldWrites, atHold, oldToken, tookOver.Seconds(), boundNew, newToken, released.Seconds(), denied, fence.Policy, late)
	if late != 0 {
		t.Errorf("%d Bindings of the old term (%s) landed after the new leader (%s) took over", late, oldToken, newToken)
	}
	if denied == 0 {
		t.Fatalf("the fence policy denied nothing: no Binding was held (the leader wrote none in %v), so the test proved nothing", fenceHoldWrites)
	}

	wave2 := make(chan struct{})
	go func() { defer close(wave2); e.createBurst("fence-resumed", pausedFirstWave, pods) }()
	<-wave1
	<-wave2
	e.waitAllBound(pods, 6*time.Minute)
	e.logFenceMetrics(leader)
	e.checkNoOvercommit(leader, follower, cards)
}

// logFenceMetrics logs how the resumed replica saw its held Bindings end.
func (e *env) logFenceMetrics(x *framework.Extender) {
	if m, err := x.Metrics(e.ctx); err == nil {
		e.t.Logf("resumed replica: %g Bindings refused at the fence as it saw them, %g rollbacks, %g unknown outcomes (settled: %g bound, %g released)",
			m["gpushare_bind_fence_refused_total"], m["gpushare_bind_rollbacks_total"], m["gpushare_bind_unknown_outcome_total"],
			m["gpushare_bind_settled_bound_total"], m["gpushare_bind_settled_released_total"])
	}
}

// fencedReplicas starts two extender replicas as the extender's service account, the leader
// reaching kube-apiserver at leaderAPI, behind a per-request front, and kube-scheduler on the
// front; it returns once the leader leads.
func (e *env) fencedReplicas(leaderAPI string) (leader, follower *framework.Extender) {
	e.t.Helper()
	leader, err := e.c.StartExtenderAs(e.ctx, "extender-a", s.extender, 0, "--kubeconfig="+e.extenderKubeconfig(leaderAPI), "--leader-elect-identity=ext-a")
	if err != nil {
		e.t.Fatal(err)
	}
	if err := poll(e.ctx, 30*time.Second, func() (bool, error) { return leader.Leading(e.ctx) }); err != nil {
		e.t.Fatalf("the replica behind the proxy never led: %v", err)
	}
	follower, err = e.c.StartExtenderAs(e.ctx, "extender-b", s.extender, 0, "--kubeconfig="+e.extenderKubeconfig(""), "--leader-elect-identity=ext-b")
	if err != nil {
		e.t.Fatal(err)
	}
	front, err := e.c.StartRoundRobin(leader, follower)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(front.Close)
	if err := e.c.StartScheduler(front.Host); err != nil {
		e.t.Fatal(err)
	}
	return leader, follower
}

// checkNoOvercommit fails unless no card is over capacity by the API's annotations, the new
// leader's cache equals them and the old leader's audit agrees.
func (e *env) checkNoOvercommit(old, current *framework.Extender, cards map[string][]contract.GPU) {
	e.t.Helper()
	inv, err := e.c.CheckInvariants(e.ctx, "default", nil)
	if err != nil {
		e.t.Fatal(err)
	}
	if !inv.OK() {
		e.t.Fatalf("API server: %v", inv)
	}
	e.ext = current
	e.checkConsistent(cards)
	var last framework.Invariants
	if err := poll(e.ctx, 45*time.Second, func() (bool, error) {
		last, err = e.c.CheckInvariants(e.ctx, "default", old)
		return err == nil && last.OK(), err
	}); err != nil {
		e.t.Fatalf("resumed replica's audit: %v (%v)", last, err)
	}
}

// installFence applies the extender's RBAC and admission policies (config/extender/rbac.yaml,
// config/admission/extender-*.yaml) and waits until the fence policy refuses a dry-run Binding
// of the extender's account under a token that is not the Lease's.
func (e *env) installFence() {
	e.t.Helper()
	files := framework.FenceManifests()
	for i, f := range files {
		files[i] = filepath.Join(s.root, f)
	}
	if err := e.c.Apply(e.ctx, files...); err != nil {
		e.t.Fatal(err)
	}
	client, err := clientFor(e.extenderKubeconfig(""))
	if err != nil {
		e.t.Fatal(err)
	}
	if err := framework.WaitFenceInForce(e.ctx, client, "default", time.Minute); err != nil {
		e.t.Fatal(err)
	}
}

// extenderKubeconfig is a kubeconfig that acts as the extender's service account and reaches
// the API server at host ("": directly).
func (e *env) extenderKubeconfig(host string) string {
	e.t.Helper()
	user, groups := framework.ServiceAccountUser("kube-system", "gpushare-extender")
	path, err := e.c.KubeconfigAs(user, groups, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	if host == "" {
		return path
	}
	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, cl := range cfg.Clusters {
		u, err := url.Parse(cl.Server)
		if err != nil {
			e.t.Fatal(err)
		}
		u.Host = host
		cl.Server = u.String()
	}
	path += "-via-" + strings.ReplaceAll(host, ":", "-")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		e.t.Fatal(err)
	}
	return path
}

// leaseToken is the fence token of the extender's Lease now.
func (e *env) leaseToken() string {
	e.t.Helper()
	cfg := server.DefaultElectionConfig()
	l, err := e.c.Client.CoordinationV1().Leases(cfg.Namespace).Get(e.ctx, cfg.Name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	var holder string
	var transitions int32
	if l.Spec.HolderIdentity != nil {
		holder = *l.Spec.HolderIdentity
	}
	if l.Spec.LeaseTransitions != nil {
		transitions = *l.Spec.LeaseTransitions
	}
	return server.FenceToken(holder, int(transitions))
}

// boundUnder counts the bound pods whose Binding carried token.
func (e *env) boundUnder(token string) int {
	e.t.Helper()
	list, err := e.c.Client.CoreV1().Pods("default").List(e.ctx, metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	n := 0
	for i := range list.Items {
		if p := &list.Items[i]; p.Spec.NodeName != "" && p.Annotations[contract.AnnotationFence] == token {
			n++
		}
	}
	return n
}

// fenceDenials is how many requests kube-apiserver's fence policy has denied
// (apiserver_validating_admission_policy_check_total, enforcement_action deny).
func (e *env) fenceDenials() int {
	e.t.Helper()
	raw, err := e.c.Client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	n := 0
	sc := bufio.NewScanner(strings.NewReader(string(raw)))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "apiserver_validating_admission_policy_check_total{") ||
			!strings.Contains(line, `policy="`+fence.Policy+`"`) || !strings.Contains(line, `enforcement_action="deny"`) {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			e.t.Fatal(err)
		}
		n += int(v)
	}
	return n
}
