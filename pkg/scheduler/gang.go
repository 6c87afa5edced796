package scheduler

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/gpushare/gpushare/pkg/contract"
)

// Gangs (pod groups, KEP-4671; docs/design.md, "Gangs (pod groups)"). kube-scheduler v1.37
// schedules the pods of a gang PodGroup in one cycle: it calls the filter pod by pod while the
// placements of the group's earlier pods exist only in its own snapshot, where gpu-mem is a
// node total, and the extender charges a card only at bind. Once the GangScheduling plugin's
// Permit has let the whole group go, it binds the members concurrently, one bind call each. A
// member whose card its own group took fails alone and the others stay bound, holding memory
// for a group that never starts.
//
// BindGang makes the binds of a gang's quorum all or nothing: they meet here, their cards are
// charged together or not at all, and only then does each create its Binding (Bind, which
// finds its charge and keeps it).

// DefaultGangWait is how long the first bind of a gang's quorum waits for the others.
// kube-scheduler sends them within milliseconds of each other; its bind httpTimeout (30 s in the
// shipped configuration) must be longer.
const DefaultGangWait = 10 * time.Second

// ErrGangUnfit: the pods of a gang's quorum do not all fit their nodes' cards together, or not
// all of them came to bind; none of them is bound.
var ErrGangUnfit = errors.New("gang not bound: all or nothing")

// WithGangWait sets how long the binds of a gang's quorum wait for each other (DefaultGangWait).
func WithGangWait(d time.Duration) Option { return func(o *options) { o.ext.gangs.wait = d } }

// gangs are the rounds of gang binds gathering, by PodGroup.
type gangs struct {
	wait   time.Duration
	mu     sync.Mutex
	rounds map[string]*gangRound // namespace/podGroup → the round gathering
}

// gangRound is one gathering of a gang's binds: it closes when need members came (their
// cards are then charged together), when the wait ends, or when a member's bind is cancelled.
type gangRound struct {
	need    int
	members []gangMember
	closed  bool          // no member joins any more (guarded by gangs.mu)
	done    chan struct{} // closed once err is final
	err     error
}

type gangMember struct {
	pod  *v1.Pod
	req  contract.PodRequest
	node string
}

// BindGang is the bind verb: Bind, except for a pod of a gang PodGroup, whose bind first
// gathers with the binds of the rest of the gang's quorum (minCount less its members bound or
// charged already). When the quorum is there, their cards are charged together, the largest
// requests first; if one does not fit, or the quorum does not come within the wait, none is
// charged and every one of them fails (kube-scheduler puts the pods back in its queue). A pod
// that alone completes the quorum, a pod beyond it and a pod of a group without a gang policy
// bind as any pod does.
func (e *Extender) BindGang(ctx context.Context, args *extenderv1.ExtenderBindingArgs) error {
	if !e.Leading() {
		return e.Bind(ctx, args) // refuses
	}
	pod, err := e.readPod(ctx, args)
	if err != nil || (args.PodUID != "" && pod.UID != args.PodUID) || pod.Spec.NodeName != "" ||
		pod.Spec.SchedulingGroup == nil || pod.Spec.SchedulingGroup.PodGroupName == nil {
		return e.Bind(ctx, args) // not a gang's, or Bind says what is wrong
	}
	req, err := contract.ParseRequest(pod, &e.names)
	if err != nil || req.Empty() {
		return e.Bind(ctx, args)
	}
	if err := e.gather(ctx, gangMember{pod: pod, req: req, node: args.Node}, *pod.Spec.SchedulingGroup.PodGroupName); err != nil {
		return fmt.Errorf("bind %s to %s: %w", klog.KObj(pod), args.Node, err)
	}
	err = e.Bind(ctx, args)
	if err != nil && !e.inflight.busy(pod.UID) {
		// Bind failed before it took the charge over (no longer leading, the pod unreadable,
		// the node's CPU or memory gone meanwhile) or released it: the gang's charge goes too.
		// A Binding of unknown outcome keeps it while Bind's settling is under way.
		e.cache.ForgetPod(pod.UID)
	}
	return err
}

// gather adds m to its gang's round and waits for the round to close; nil means m's card is
// charged (or m binds alone).
func (e *Extender) gather(ctx context.Context, m gangMember, group string) error {
	g := &e.gangs
	key := m.pod.Namespace + "/" + group
	g.mu.Lock()
	r := g.rounds[key]
	if r == nil {
		g.mu.Unlock()
		need, err := e.gangNeed(ctx, m.pod.Namespace, group)
		if err != nil {
			return fmt.Errorf("%w: gang %s: %w", ErrGangUnfit, key, err)
		}
		if need <= 1 {
			return nil
		}
		g.mu.Lock()
		if r = g.rounds[key]; r == nil {
			r = &gangRound{need: need, done: make(chan struct{})}
			if g.rounds == nil {
				g.rounds = map[string]*gangRound{}
			}
			g.rounds[key] = r
			wait := cmp.Or(g.wait, DefaultGangWait)
			time.AfterFunc(wait, func() {
				g.fail(key, r, func() error {
					return fmt.Errorf("%w: gang %s: %d of the %d pods its quorum still needs came to bind within %v; none is bound",
						ErrGangUnfit, key, len(r.members), r.need, wait)
				})
			})
		}
	}
	r.members = slices.DeleteFunc(r.members, func(o gangMember) bool { return o.pod.UID == m.pod.UID }) // a retried bind
	r.members = append(r.members, m)
	if len(r.members) >= r.need {
		r.closed = true
		delete(g.rounds, key)
		g.mu.Unlock()
		r.err = e.chargeGang(ctx, key, r.members)
		close(r.done)
	} else {
		g.mu.Unlock()
	}
	select {
	case <-r.done:
	case <-ctx.Done():
		g.fail(key, r, func() error {
			return fmt.Errorf("%w: gang %s: the bind of %s was cancelled while the quorum gathered: %w", ErrGangUnfit, key, klog.KObj(m.pod), ctx.Err())
		})
		<-r.done
	}
	return r.err
}

// fail closes round r of key with err() unless it is closed already.
func (g *gangs) fail(key string, r *gangRound, err func() error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if r.closed {
		return
	}
	r.closed = true
	if g.rounds[key] == r {
		delete(g.rounds, key)
	}
	r.err = err()
	close(r.done)
}

// chargeGang charges the cards of every member on its node, the largest requests first, as
// Bind would; if one cannot be charged, none stays charged.
func (e *Extender) chargeGang(ctx context.Context, key string, members []gangMember) error {
	slices.SortStableFunc(members, func(a, b gangMember) int {
		return cmp.Or(cmp.Compare(b.req.TotalUnits(), a.req.TotalUnits()), cmp.Compare(a.pod.Name, b.pod.Name))
	})
	charged := make([]types.UID, 0, len(members))
	for _, m := range members {
		t := e.targetOf(m.pod, m.node)
		err := e.checkBind(m.pod, &m.req, m.node, t.node, t.node != nil)
		if err == nil {
			_, err = e.assume(ctx, m.pod, &m.req, t)
		}
		if err != nil {
			for _, uid := range charged {
				e.cache.ForgetPod(uid)
			}
			return fmt.Errorf("%w: gang %s: its %d pods binding together do not all fit their nodes' GPUs (%s on %s: %w); none is bound",
				ErrGangUnfit, key, len(members), m.pod.Name, m.node, err)
		}
		charged = append(charged, m.pod.UID)
	}
	klog.FromContext(ctx).V(2).Info("Charged a gang's quorum together", "podGroup", key, "pods", len(members))
	return nil
}

// gangNeed is how many binds of group's pods must meet: the PodGroup's minCount less its pods
// bound or charged already (0 when it has no gang policy).
func (e *Extender) gangNeed(ctx context.Context, namespace, group string) (int, error) {
	pg, err := e.client.SchedulingV1beta1().PodGroups(namespace).Get(ctx, group, metav1.GetOptions{})
	if err != nil {
		return 0, fmt.Errorf("read its PodGroup: %w", err)
	}
	if pg.Spec.SchedulingPolicy.Gang == nil {
		return 0, nil
	}
	pods, err := e.client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return 0, fmt.Errorf("list its pods: %w", err)
	}
	placed := 0
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Spec.SchedulingGroup == nil || p.Spec.SchedulingGroup.PodGroupName == nil || *p.Spec.SchedulingGroup.PodGroupName != group ||
			p.DeletionTimestamp != nil || p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed {
			continue
		}
		if _, charged := e.cache.Pod(p.UID); charged || p.Spec.NodeName != "" {
			placed++
		}
	}
	return int(pg.Spec.SchedulingPolicy.Gang.MinCount) - placed, nil
}
