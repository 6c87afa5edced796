package scheduler

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
)

// ErrNotLeader: this extender replica does not bind; another one leads.
var ErrNotLeader = errors.New("this extender replica is not the leader")

// Leadership says whether this extender replica is the one that binds. Any number of replicas
// may answer filter and prioritize from their caches; only the leader binds, so only one of
// them ever charges cards.
type Leadership interface {
	// Leading reports whether this replica leads now.
	Leading() bool
	// Leader is the identity of the replica that leads, as last seen ("" if unknown).
	Leader() string
}

// WithLeadership makes the extender bind only while l says it leads.
func WithLeadership(l Leadership) Option { return func(e *Extender) { e.leadership = l } }

// ElectionConfig is where the replicas elect their leader and how fast a dead leader is
// replaced: a follower takes over at most LeaseDuration plus RetryPeriod after the leader's
// last renewal; a leader that cannot renew for RenewDeadline stops binding first.
type ElectionConfig struct {
	// Namespace and Name name the Lease.
	Namespace, Name string
	// Identity names this replica (the pod's name).
	Identity string
	// LeaseDuration, RenewDeadline and RetryPeriod are client-go's leader election timings.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

// DefaultElectionConfig replaces a dead leader within about 12 s: a follower sees the Lease
// expire LeaseDuration after it last saw it renewed, and client-go's retries are jittered up to
// 2.2 x RetryPeriod apart, so the worst case is about LeaseDuration + 4.4 x RetryPeriod. (With
// 10 s / 7 s / 2 s, client-go's usual values, a SIGKILLed leader was replaced after 15.2 s.)
func DefaultElectionConfig() ElectionConfig {
	return ElectionConfig{Namespace: "kube-system", Name: "gpushare-extender",
		LeaseDuration: 8 * time.Second, RenewDeadline: 5 * time.Second, RetryPeriod: time.Second}
}

// Elector runs client-go leader election on a Lease and tracks whether this replica leads.
// It implements Leadership; safe for concurrent use.
type Elector struct {
	cfg     ElectionConfig
	client  kubernetes.Interface
	leading atomic.Bool
	leader  atomic.Pointer[string]
	// onChange, if set, is called whenever leading changes (tests, metrics).
	onChange func(leading bool)
}

var _ Leadership = (*Elector)(nil)

// NewElector returns an elector over client's Leases; Run starts it.
func NewElector(client kubernetes.Interface, cfg ElectionConfig) (*Elector, error) {
	if cfg.Identity == "" || cfg.Name == "" || cfg.Namespace == "" {
		return nil, fmt.Errorf("leader election needs a lease namespace, name and identity")
	}
	if cfg.RenewDeadline >= cfg.LeaseDuration || cfg.RetryPeriod >= cfg.RenewDeadline {
		return nil, fmt.Errorf("leader election needs retry period < renew deadline < lease duration")
	}
	return &Elector{cfg: cfg, client: client}, nil
}

// Leading reports whether this replica leads now.
func (e *Elector) Leading() bool { return e.leading.Load() }

// Leader is the identity of the replica that leads, as last seen. A replica that leads names
// itself at once (client-go reports a new leader from a goroutine of its own, possibly later).
func (e *Elector) Leader() string {
	if e.leading.Load() {
		return e.cfg.Identity
	}
	if l := e.leader.Load(); l != nil {
		return *l
	}
	return ""
}

// Run takes part in the election until ctx ends, standing again whenever leadership is lost.
// On ctx's end a leader releases the Lease, so that another replica takes over at once.
func (e *Elector) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx).WithValues("lease", e.cfg.Namespace+"/"+e.cfg.Name, "identity", e.cfg.Identity)
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: e.cfg.Namespace, Name: e.cfg.Name},
		Client:     e.client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: e.cfg.Identity},
	}
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: lock, ReleaseOnCancel: true, Name: e.cfg.Name,
		LeaseDuration: e.cfg.LeaseDuration, RenewDeadline: e.cfg.RenewDeadline, RetryPeriod: e.cfg.RetryPeriod,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) {
				logger.Info("Leading: this replica binds")
				e.set(true)
			},
			OnStoppedLeading: func() {
				logger.Info("Stopped leading: this replica no longer binds")
				e.set(false)
			},
			OnNewLeader: func(identity string) {
				e.leader.Store(&identity)
				logger.Info("Leader", "leader", identity)
			},
		},
	})
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	for ctx.Err() == nil {
		le.Run(ctx) // returns when leadership is lost or ctx ends
	}
	return nil
}

func (e *Elector) set(leading bool) {
	e.leading.Store(leading)
	if e.onChange != nil {
		e.onChange(leading)
	}
}
