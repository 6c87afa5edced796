package main

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"os"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/draconvert"
	"github.com/gpushare/gpushare/pkg/placement/policies"
	"github.com/gpushare/gpushare/pkg/scheduler"
	"github.com/gpushare/gpushare/pkg/scheduler/preempt"
	"github.com/gpushare/gpushare/pkg/scheduler/server"
)

// Default listen addresses: HTTPS on every interface, plain HTTP on loopback only.
const (
	httpsAddress = ":39999"
	plainAddress = "127.0.0.1:39999"
)

// listenAddress is --address, or the default of the serving mode.
func (c *config) listenAddress() string {
	switch {
	case c.address != "":
		return c.address
	case c.plainHTTP:
		return plainAddress
	default:
		return httpsAddress
	}
}

// config is the extender's command line.
type config struct {
	address    string
	kubeconfig string
	master     string
	policy     string
	qps        float64
	burst      int
	maxBody    int64
	names      contract.Names
	// tls serves HTTPS; plainHTTP serves plain HTTP instead, only when asked for.
	tls       server.TLSFiles
	plainHTTP bool
	// leaderElect runs leader election among the replicas (only the leader binds).
	leaderElect bool
	election    server.ElectionConfig
	// preemption lets a gpu-mem pod that fits no card evict lower-priority pods from one card;
	// holdKeyFile holds the key that signs the preemption holds (shared by the replicas).
	preemption  bool
	holdKeyFile string
	// forward has followers forward the verbs to the leader (server.ForwardConfig).
	forward bool
	// profilingAddress, if set, serves Go's profiles on that loopback address.
	profilingAddress string
	// filterChooses answers filter with the one best node (scheduler.WithFilterChoosing).
	filterChooses bool
	// bindEvents records a GPUAssigned event on each pod bound with gpu-mem, at most eventQPS
	// per second.
	bindEvents bool
	eventQPS   float64
	// gcPercent is the garbage collector's target (Go's GOGC), unless GOGC is set, and
	// gcMinHeadroom the least the heap may grow between collections (gctarget.Target).
	gcPercent     int
	gcMinHeadroom resource.Quantity
	// draWebhook serves the DRA conversion webhook (pkg/draconvert) at draconvert.Path, asking
	// devices of draDeviceClass, with at most draMaxTemplates claim templates per namespace.
	draWebhook      bool
	draDeviceClass  string
	draMaxTemplates int
	// draMode runs the extender in DRA mode (scheduler.WithDRA) over the devices of draDriver.
	draMode   bool
	draDriver string
}

func defaultConfig() config {
	election := server.DefaultElectionConfig()
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		election.Namespace = ns
	}
	election.Identity = os.Getenv("POD_NAME")
	if election.Identity == "" {
		election.Identity, _ = os.Hostname()
	}
	return config{policy: policies.Default, qps: 200, burst: 400,
		maxBody: scheduler.DefaultMaxBodyBytes, names: contract.DefaultNames(), draDeviceClass: draconvert.DefaultDeviceClass, draMaxTemplates: draconvert.DefaultMaxTemplates, draDriver: draconvert.DefaultDriver, leaderElect: true, election: election, forward: true, preemption: true,
		filterChooses: true, bindEvents: true, eventQPS: defaultEventQPS, gcPercent: defaultGCPercent,
		gcMinHeadroom: resource.MustParse(defaultGCMinHeadroom)}
}

// defaultGCPercent lets the heap grow by half the live heap between collections instead of Go's
// 100 %: at 5,000 nodes and 50,000 pods the resident set after filter calls went from 220 to
// 187 MiB with no change in filter latency (docs/benchmarks.md, Memory).
const defaultGCPercent = 50

// defaultGCMinHeadroom: below 64 MiB of live heap (a cluster well under 5,000 nodes) 50 % would
// collect every few MB allocated; the heap may grow by this much instead. In make bench-e2e
// (1,000 nodes) the extender's CPU per 1,000 pods went from 1.5 to 1.3-1.4 s, the collector's share
// of it from 17 to 4 %; at 5,000 nodes and 50,000 pods (63 MB live) it changes nothing
// (docs/design.md, Throughput).
const defaultGCMinHeadroom = "32Mi"

// defaultEventQPS bounds the GPUAssigned events recorded per second: every bind of a steadily
// busy cluster gets its event, while in a burst of binds the events over the rate are dropped
// instead of adding a write per bind to the API server and etcd the binds need (docs/design.md,
// Throughput).
const defaultEventQPS = 10

func (c *config) addFlags(fs *flag.FlagSet, policies policies.Registry) {
	fs.StringVar(&c.address, "address", c.address, "host:port the extender listens on (default "+httpsAddress+" for HTTPS, "+plainAddress+" with --plain-http)")
	fs.StringVar(&c.tls.CertFile, "tls-cert-file", "", "PEM serving certificate (with its chain); reloaded when the file changes")
	fs.StringVar(&c.tls.KeyFile, "tls-private-key-file", "", "PEM private key of --tls-cert-file; reloaded when the file changes")
	fs.StringVar(&c.tls.ClientCAFile, "client-ca-file", "", "PEM CA bundle: the verbs, /inspect and /debug then require a client certificate signed by it (kube-scheduler's tlsConfig certFile/keyFile); reloaded when the file changes")
	fs.BoolVar(&c.plainHTTP, "plain-http", false, "serve plain HTTP without authentication (a sidecar of kube-scheduler in the same pod); listens on loopback unless --address says otherwise")
	fs.StringVar(&c.kubeconfig, "kubeconfig", c.kubeconfig, "kubeconfig file; empty means in-cluster")
	fs.StringVar(&c.master, "master", c.master, "API server address, overrides the kubeconfig's")
	fs.StringVar(&c.policy, "policy", c.policy, fmt.Sprintf("placement policy, one of %v", policies.Names()))
	fs.Float64Var(&c.qps, "kube-api-qps", c.qps, "queries per second to the API server (client-go's default 5 capped binds at ~2.7/s)")
	fs.IntVar(&c.burst, "kube-api-burst", c.burst, "burst of queries to the API server")
	fs.Int64Var(&c.maxBody, "max-body-bytes", c.maxBody, "largest request body accepted")
	fs.StringVar(&c.profilingAddress, "profiling-address", "", "loopback host:port to serve Go's runtime profiles on (/debug/pprof/, unauthenticated); empty: off")
	fs.IntVar(&c.gcPercent, "gc-percent", c.gcPercent, "garbage collector target, as Go's GOGC (heap growth over the live heap before a collection, in percent); the GOGC environment variable wins when set")
	fs.Func("gc-min-headroom", "least the heap may grow between collections, a quantity such as 32Mi, whatever --gc-percent of a small live heap gives; 0: --gc-percent alone (default "+defaultGCMinHeadroom+")", func(s string) error {
		q, err := resource.ParseQuantity(s)
		if err != nil {
			return fmt.Errorf("gc-min-headroom %q: %w", s, err)
		}
		c.gcMinHeadroom = q
		return nil
	})
	fs.BoolVar(&c.bindEvents, "bind-events", c.bindEvents, "record a Normal GPUAssigned event on each pod bound with gpu-mem, naming the node and its cards (one asynchronous API write per bind)")
	fs.Float64Var(&c.eventQPS, "event-qps", c.eventQPS, "GPUAssigned events recorded per second at most (bursts of twice that); events over it are dropped and counted in gpushare_events_dropped_total (the pods' annotations name their cards all the same)")
	fs.BoolVar(&c.filterChooses, "filter-chooses-node", c.filterChooses, "answer filter for a gpu-mem pod with the one node the policy ranks best (kube-scheduler then binds it there without scoring: the fastest setting); false answers every node where the pod fits and leaves the choice to prioritize and kube-scheduler's own scores")
	fs.BoolVar(&c.draWebhook, "dra-webhook", false, "also serve the mutating webhook of DRA mode at "+draconvert.Path+" (config/dra/webhook.yaml): a pod asking gpu-mem gets one ResourceClaim per container instead, on every replica, without a client certificate (docs/dra.md)")
	fs.StringVar(&c.draDeviceClass, "dra-device-class", c.draDeviceClass, "the DeviceClass the DRA webhook's claims ask devices of")
	fs.IntVar(&c.draMaxTemplates, "dra-max-templates", c.draMaxTemplates, "the most claim templates the DRA webhook creates in one namespace (one per ask shape); a pod asking a shape that would make one more is refused")
	fs.BoolVar(&c.draMode, "dra-mode", false, "DRA mode (docs/dra.md): read cards from the driver's ResourceSlices and what pods hold from their allocated ResourceClaims, place pods converted by the DRA webhook predicting the card kube-scheduler's allocator takes (first fit), and serve filter and prioritize only: kube-scheduler binds (config/dra/scheduler-config.yaml); --gpu-preemption does not apply")
	fs.StringVar(&c.draDriver, "dra-driver", c.draDriver, "the DRA driver (share-plugin --driver-name) whose ResourceSlices and claims --dra-mode reads, and whose device attributes the claims of --dra-webhook select on")
	fs.BoolVar(&c.leaderElect, "leader-elect", c.leaderElect, "elect a leader among the replicas on a Lease; only the leader binds")
	fs.StringVar(&c.election.Namespace, "leader-elect-namespace", c.election.Namespace, "namespace of the Lease (default: $POD_NAMESPACE, else kube-system)")
	fs.StringVar(&c.election.Name, "leader-elect-name", c.election.Name, "name of the Lease")
	fs.StringVar(&c.election.Identity, "leader-elect-identity", c.election.Identity, "this replica's name in the Lease (default: $POD_NAME, else the host name)")
	fs.StringVar(&c.election.Address, "leader-elect-advertise-address", "", "host:port the other replicas reach this one at, to forward the verbs while it leads (default: --address when it names a host, else $POD_IP with --address's port)")
	fs.BoolVar(&c.preemption, "gpu-preemption", c.preemption, "a pod asking gpu-mem that fits no card evicts (Eviction API) the fewest lower-priority pods from the one card where that costs least, and the freed memory is held for it (docs/design.md, Preemption); false: kube-scheduler's own preemption, which sees gpu-mem only as a node total")
	fs.StringVar(&c.holdKeyFile, "hold-key-file", "", fmt.Sprintf("file of at least %d bytes, the same for every replica (a Secret): the key that signs the preemption holds written on pods, so that the extender honours only its own (a restarted extender or a new leader keeps them); empty: a random key of this process, and holds do not survive a restart or a failover", preempt.MinHoldKeyBytes))
	fs.BoolVar(&c.forward, "forward-to-leader", c.forward, "a follower forwards filter, prioritize, bind and preempt to the leader over mutual TLS (its serving certificate as client certificate), so that any replica can be called; false: followers answer filter and prioritize from their own caches and refuse binds")
	fs.DurationVar(&c.election.LeaseDuration, "leader-elect-lease-duration", c.election.LeaseDuration, "how long a leader's Lease holds without renewal")
	fs.DurationVar(&c.election.RenewDeadline, "leader-elect-renew-deadline", c.election.RenewDeadline, "how long a leader tries to renew before it stops binding")
	fs.DurationVar(&c.election.RetryPeriod, "leader-elect-retry-period", c.election.RetryPeriod, "how often replicas try to acquire or renew the Lease")
	fs.DurationVar(&c.election.SafetyMargin, "leader-elect-safety-margin", c.election.SafetyMargin, "the leader binds only while less than lease duration minus this has passed since its last successful Lease renewal, by its own monotonic clock (covers clock drift and the time a Binding takes)")
	fs.DurationVar(&c.election.FenceLag, "leader-elect-fence-lag", c.election.FenceLag, "a replica that has just taken the Lease waits this long before it binds: the API server's admission may accept the previous leader's fence token for that long, and this replica's pod informer must have seen what it accepted (docs/design.md, Fencing)")
	c.names.AddFlags(fs)
}

// advertiseAddress is where the other replicas reach this one: --leader-elect-advertise-address,
// else --address when it names a host, else $POD_IP with --address's port; "" when none is
// known (the replica then leads without followers forwarding to it).
func (c *config) advertiseAddress() string {
	if c.election.Address != "" {
		return c.election.Address
	}
	host, port, err := net.SplitHostPort(c.listenAddress())
	if err != nil {
		return ""
	}
	if ip := net.ParseIP(host); host != "" && (ip == nil || !ip.IsUnspecified()) {
		return c.listenAddress()
	}
	if ip := os.Getenv("POD_IP"); ip != "" {
		return net.JoinHostPort(ip, port)
	}
	return ""
}

func (c *config) validate(policies policies.Registry) error {
	var errs []error
	if _, err := policies.New(c.policy); err != nil {
		errs = append(errs, err)
	}
	if c.qps <= 0 || c.burst <= 0 {
		errs = append(errs, fmt.Errorf("--kube-api-qps and --kube-api-burst must be positive"))
	}
	switch {
	case c.plainHTTP && (c.tls != server.TLSFiles{}):
		errs = append(errs, fmt.Errorf("--plain-http and the TLS files (--tls-cert-file, --tls-private-key-file, --client-ca-file) exclude each other"))
	case !c.plainHTTP && (c.tls.CertFile == "" || c.tls.KeyFile == ""):
		errs = append(errs, fmt.Errorf("--tls-cert-file and --tls-private-key-file are required to serve HTTPS; "+
			"--plain-http serves plain HTTP without authentication instead (on %s by default: a sidecar of kube-scheduler)", plainAddress))
	}
	if c.bindEvents && c.eventQPS <= 0 {
		errs = append(errs, fmt.Errorf("--event-qps must be positive (--bind-events=false turns the events off)"))
	}
	if c.gcPercent <= 0 {
		errs = append(errs, fmt.Errorf("--gc-percent must be positive (GOGC=off in the environment turns the collector off)"))
	}
	if c.gcMinHeadroom.Sign() < 0 || c.gcMinHeadroom.Value() > 1<<40 {
		errs = append(errs, fmt.Errorf("--gc-min-headroom must be between 0 and 1Ti, not %s", c.gcMinHeadroom.String()))
	}
	if c.maxBody < 1024 {
		errs = append(errs, fmt.Errorf("--max-body-bytes must be at least 1024"))
	}
	if c.leaderElect {
		if _, err := server.NewElector(nil, c.election); err != nil {
			errs = append(errs, fmt.Errorf("--leader-elect: %w", err))
		}
	}
	if err := c.names.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.draMaxTemplates <= 0 {
		errs = append(errs, fmt.Errorf("--dra-max-templates must be positive, got %d", c.draMaxTemplates))
	}
	if c.draMode && c.draDriver == "" {
		errs = append(errs, fmt.Errorf("--dra-driver must name the DRA driver with --dra-mode"))
	}
	return errors.Join(errs...)
}
