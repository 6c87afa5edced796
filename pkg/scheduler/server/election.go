package server

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
)

// Leadership says whether this extender replica is the one that binds. Any number of replicas
// may answer filter and prioritize from their caches; only the leader binds, so only one of
// them ever charges cards.
type Leadership interface {
	// Leading reports whether this replica leads now. The extender asks right before every
	// Binding write (the fence), so an implementation must answer from the current time, not
	// from a flag set when leadership was won.
	Leading() bool
	// Leader is the identity of the replica that leads, as last seen ("" if unknown).
	Leader() string
}

// ElectionConfig is where the replicas elect their leader and how fast a dead leader is
// replaced: a follower takes over at most LeaseDuration plus RetryPeriod after the leader's
// last renewal; a leader that cannot renew for RenewDeadline stops binding first.
type ElectionConfig struct {
	// Namespace and Name name the Lease.
	Namespace, Name string
	// Identity names this replica (the pod's name).
	Identity string
	// Address is the host:port the other replicas reach this one at, to forward the verbs
	// they are sent while this one leads (forward.go). The Lease names the holder as
	// Identity@Address; empty: the Lease names Identity alone and nobody forwards to it.
	Address string
	// LeaseDuration, RenewDeadline and RetryPeriod are client-go's leader election timings.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// SafetyMargin fences the binds: this replica binds only while less than LeaseDuration -
	// SafetyMargin has passed, on its own monotonic clock, since it sent the last Lease write
	// that succeeded. The margin covers the clocks' rates drifting apart and the time a
	// Binding takes to reach the API server (docs/design.md, Fencing).
	SafetyMargin time.Duration
	// FenceLag is how long a replica that has just acquired the Lease waits before it binds:
	// the API server's admission (config/admission/extender-fence.yaml) may still hold the
	// previous leader's token for that long, and accept its Bindings, and this replica's pod
	// informer must have seen them (docs/design.md, Fencing).
	FenceLag time.Duration
}

// DefaultElectionConfig replaces a dead leader within about 12 s: a follower sees the Lease
// expire LeaseDuration after it last saw it renewed, and client-go's retries are jittered up to
// 2.2 x RetryPeriod apart, so the worst case is about LeaseDuration + 4.4 x RetryPeriod. (With
// 10 s / 7 s / 2 s, client-go's usual values, a SIGKILLed leader was replaced after 15.2 s.)
func DefaultElectionConfig() ElectionConfig {
	return ElectionConfig{Namespace: "kube-system", Name: "gpushare-extender",
		LeaseDuration: 8 * time.Second, RenewDeadline: 5 * time.Second, RetryPeriod: time.Second,
		SafetyMargin: 2 * time.Second, FenceLag: 2 * time.Second}
}

// Elector runs client-go leader election on a Lease and tracks whether this replica leads.
// It implements Leadership; safe for concurrent use.
//
// Leading is a lease of its own clock, not client-go's callbacks: client-go reports a lost
// Lease only after a renewal has failed for RenewDeadline, and a replica resumed after a
// pause longer than the Lease (SIGSTOP, a frozen VM) went on binding for those seconds beside
// the replica that had taken over. Leading is true only while less than LeaseDuration -
// SafetyMargin has passed since the start of the last Lease write of this replica that
// succeeded (renewLock records it); another replica can take the Lease only LeaseDuration
// after it saw that write, so after the write was sent. It is also false for FenceLag after
// this replica took the Lease. That clock cannot stop a write already built: Fence gives the
// token the writes carry for the API server to check (config/admission/extender-fence.yaml).
type Elector struct {
	cfg    ElectionConfig
	client kubernetes.Interface
	// now is the clock of the fence: time.Now, whose readings carry the monotonic clock.
	now func() time.Time
	// leading is client-go's view (its callbacks); renewed the last successful Lease write
	// (nil: none, or leadership lost or released since).
	leading atomic.Bool
	renewed atomic.Pointer[leaseWrite]
	leader  atomic.Pointer[string]
	// observed is the Lease record as last read and when, by this replica's clock, it was last
	// seen to change (a live leader renews it every RetryPeriod).
	observed atomic.Pointer[observedLease]
	// onChange, if set, is called whenever leading changes (tests, metrics).
	onChange func(leading bool)
}

var _ Leadership = (*Elector)(nil)

// ElectorOption configures an Elector.
type ElectorOption func(*Elector)

// WithElectorClock sets the clock of the fence (tests); it defaults to time.Now.
func WithElectorClock(now func() time.Time) ElectorOption { return func(e *Elector) { e.now = now } }

// NewElector returns an elector over client's Leases; Run starts it.
func NewElector(client kubernetes.Interface, cfg ElectionConfig, opts ...ElectorOption) (*Elector, error) {
	if cfg.Identity == "" || cfg.Name == "" || cfg.Namespace == "" {
		return nil, fmt.Errorf("leader election needs a lease namespace, name and identity")
	}
	if strings.Contains(cfg.Address, "@") {
		return nil, fmt.Errorf("leader election: the advertised address %q has an @", cfg.Address)
	}
	if cfg.RenewDeadline >= cfg.LeaseDuration || cfg.RetryPeriod >= cfg.RenewDeadline {
		return nil, fmt.Errorf("leader election needs retry period < renew deadline < lease duration")
	}
	if cfg.SafetyMargin < 0 || cfg.LeaseDuration-cfg.SafetyMargin <= cfg.RetryPeriod {
		return nil, fmt.Errorf("leader election needs 0 <= safety margin < lease duration - retry period (a leader renews every retry period)")
	}
	if cfg.FenceLag < 0 || cfg.FenceLag >= cfg.LeaseDuration {
		return nil, fmt.Errorf("leader election needs 0 <= fence lag < lease duration")
	}
	e := &Elector{cfg: cfg, client: client, now: time.Now}
	for _, o := range opts {
		o(e)
	}
	return e, nil
}

// Leading reports whether this replica leads now: client-go has not reported the Lease lost,
// the last Lease write of this replica that succeeded was sent less than LeaseDuration -
// SafetyMargin ago by its own clock, and its term began FenceLag ago or more.
func (e *Elector) Leading() bool {
	_, ok := e.Fence()
	return ok
}

// Fence is the fence of a term this replica leads in: the token its writes carry, for the
// API server to check against the Lease, and when the term ends by this replica's clock.
type Fence struct {
	// Token is the Lease's holder identity and leaseTransitions as this replica last wrote
	// them, "holder/transitions" (contract.AnnotationFence).
	Token string
	// Deadline is when this replica stops leading unless it renews: the last successful
	// Lease write's start plus LeaseDuration - SafetyMargin. It carries the monotonic clock.
	Deadline time.Time
}

// Fence returns the fence of the term this replica leads in, false when it does not lead
// now (see Leading).
func (e *Elector) Fence() (Fence, bool) {
	if !e.leading.Load() {
		return Fence{}, false
	}
	w := e.renewed.Load()
	if w == nil {
		return Fence{}, false
	}
	now := e.now()
	deadline := w.sent.Add(e.cfg.LeaseDuration - e.cfg.SafetyMargin)
	if !now.Before(deadline) || now.Sub(w.since) < e.cfg.FenceLag {
		return Fence{}, false
	}
	return Fence{Token: w.token, Deadline: deadline}, true
}

// LagLeft is how long this replica, which has just acquired the Lease, still waits out the
// fence lag before it leads: 0 when it does not hold the Lease or is past the lag.
func (e *Elector) LagLeft() time.Duration {
	w := e.renewed.Load()
	if !e.leading.Load() || w == nil {
		return 0
	}
	return max(e.cfg.FenceLag-e.now().Sub(w.since), 0)
}

// FenceToken is the token of a Lease record: its holder and its transitions, as the
// gpushare-extender-fence admission policy compares them with the Lease.
func FenceToken(holder string, transitions int) string {
	return holder + "/" + strconv.Itoa(transitions)
}

// holder is how the Lease names this replica: Identity@Address, or Identity without an
// address.
func (c ElectionConfig) holder() string {
	if c.Address == "" {
		return c.Identity
	}
	return c.Identity + "@" + c.Address
}

// observedLease is a Lease record as this replica last read it.
type observedLease struct {
	holder string
	renew  time.Time
	// changed is when, by this replica's clock, the record was first read as it is.
	changed time.Time
}

// LeaderAddress is where the replica that leads listens, for a follower to forward to: ""
// when this replica leads, when the holder of the Lease named no address, or when the Lease
// has not been seen renewed for RenewDeadline (a leader that cannot renew for that long stops
// binding itself; one that is paused answers nothing).
func (e *Elector) LeaderAddress() string {
	if e.Leading() {
		return ""
	}
	o := e.observed.Load()
	if o == nil || o.holder == "" || o.holder == e.cfg.holder() || e.now().Sub(o.changed) >= e.cfg.RenewDeadline {
		return ""
	}
	i := strings.LastIndexByte(o.holder, '@')
	if i < 0 {
		return ""
	}
	return o.holder[i+1:]
}

// Leader is the identity of the replica that leads, as last seen. A replica that leads names
// itself at once (client-go reports a new leader from a goroutine of its own, possibly later).
func (e *Elector) Leader() string {
	if e.Leading() {
		return e.cfg.holder()
	}
	if l := e.leader.Load(); l != nil {
		return *l
	}
	return ""
}

// Run takes part in the election until ctx ends, standing again whenever leadership is lost.
// On ctx's end a leader releases the Lease, so that another replica takes over at once.
func (e *Elector) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx).WithValues("lease", e.cfg.Namespace+"/"+e.cfg.Name, "identity", e.cfg.holder())
	lock := &renewLock{Interface: &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: e.cfg.Namespace, Name: e.cfg.Name},
		Client:     e.client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: e.cfg.holder()},
	}, elector: e}
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
	if !leading {
		e.renewed.Store(nil)
	}
	if e.onChange != nil {
		e.onChange(leading)
	}
}

// renewLock records, for the fence, when this replica's Lease writes that succeeded were sent.
// client-go writes the Lease only through Create and Update: to acquire it, to renew it, and
// (holder "") to release it.
//
// It also keeps a release from clearing another replica's Lease. client-go releases (on
// ReleaseOnCancel) after every end of renew, also a failed one, and decides that it holds the
// Lease from the record it last observed, not from the one its release just read: a leader
// resumed after a pause longer than its renew deadline fails its renewal without reading the
// Lease, then "releases" the new leader's Lease (its resourceVersion is fresh) and takes it
// back at once, and both replicas bind until the new leader's fence runs out (seen in
// TestLeaderPausedMidBurst/30s, 13 cards over capacity). A release is written only when the
// Lease read right before it names this replica.
type renewLock struct {
	resourcelock.Interface
	elector *Elector
	// holder is the holder of the Lease as last read (Get).
	holder atomic.Pointer[string]
}

// errNotHolder refuses the release of a Lease another replica holds.
var errNotHolder = errors.New("the Lease is held by another replica: not released")

// Get reads the Lease and remembers its holder, and when the record last changed.
func (l *renewLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	rec, raw, err := l.Interface.Get(ctx)
	if err != nil {
		return rec, raw, err //nolint:wrapcheck // client-go's own error, for client-go
	}
	holder := rec.HolderIdentity
	l.holder.Store(&holder)
	seen := observedLease{holder: holder, renew: rec.RenewTime.Time}
	if o := l.elector.observed.Load(); o != nil && o.holder == seen.holder && o.renew.Equal(seen.renew) {
		return rec, raw, nil
	}
	seen.changed = l.elector.now()
	l.elector.observed.Store(&seen)
	return rec, raw, nil
}

// Create creates the Lease; success acquires it.
func (l *renewLock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	sent := l.elector.now()
	if err := l.Interface.Create(ctx, ler); err != nil {
		return err //nolint:wrapcheck // client-go's own error, for client-go
	}
	l.record(ler, sent)
	return nil
}

// Update writes the Lease; success acquires or renews it, or releases it. A release (no
// holder) of a Lease last read as another replica's is refused without writing.
func (l *renewLock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	if h := l.holder.Load(); ler.HolderIdentity == "" && h != nil && *h != l.Identity() {
		l.elector.renewed.Store(nil)
		return errNotHolder
	}
	sent := l.elector.now()
	if err := l.Interface.Update(ctx, ler); err != nil {
		return err //nolint:wrapcheck // client-go's own error, for client-go
	}
	l.record(ler, sent)
	return nil
}

// leaseWrite is a Lease write of this replica that succeeded.
type leaseWrite struct {
	// sent is when it was sent; since when the first write of its term was sent (a term is
	// one token), by this replica's clock.
	sent, since time.Time
	// token is the fence token it wrote (FenceToken).
	token string
}

// record notes a Lease write sent at sent: one naming this replica renews the fence, any
// other (a release) ends it. A write with another token than the last starts a term.
func (l *renewLock) record(ler resourcelock.LeaderElectionRecord, sent time.Time) {
	if ler.HolderIdentity != l.Identity() {
		l.elector.renewed.Store(nil)
		return
	}
	w := leaseWrite{sent: sent, since: sent, token: FenceToken(ler.HolderIdentity, ler.LeaderTransitions)}
	if last := l.elector.renewed.Load(); last != nil && last.token == w.token {
		w.since = last.since
	}
	l.elector.renewed.Store(&w)
}
