package scheduler

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/julienschmidt/httprouter"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/gpushare/gpushare/pkg/scheduler/fence"
	"github.com/gpushare/gpushare/pkg/scheduler/server"
	"github.com/gpushare/gpushare/pkg/scheduler/wire"
	"github.com/gpushare/gpushare/pkg/version"
)

// Prefix is the URL prefix of the extender's routes (the scheduler config's urlPrefix).
const Prefix = "/gpushare-scheduler"

// DefaultMaxBodyBytes bounds a request body. With nodeCacheCapable (the shipped configuration)
// a filter call for 25,000 candidate names and the largest Pod the API server stores is below
// 8 MiB; full Node objects (nodeCacheCapable false) need more beyond about 2,000 nodes: raise
// --max-body-bytes then.
const DefaultMaxBodyBytes = 16 << 20

// MaxNodeNames bounds the candidate nodes of one filter, prioritize or preempt call: five times
// the largest cluster Kubernetes supports.
const MaxNodeNames = 25000

// verb is one call kube-scheduler makes on the extender, as the extender serves it. Every verb
// is declared once, in verbTable, which NewExtender builds once (Extender.verbs): the routes
// (NewHandler), the forwarding of a follower's calls and the view of the cache each verb places
// on (Extender.nodeView) all read it there.
type verb struct {
	// name is the verb's path under Prefix, and its label in
	// gpushare_extender_request_duration_seconds and gpushare_forwarded_requests_total.
	name string
	// serve decodes the call, asks the Extender and encodes its answer. It runs behind the
	// guards every verb has (a client certificate when one is required, a synced cache, the
	// body budget), and it is timed.
	serve func(h *Handler, w http.ResponseWriter, r *http.Request, ps httprouter.Params)
	// forward is how a follower forwards the verb to the leader (zero: never).
	forward server.Forwarding
	// holds: other pods' preemption holds count as used on their cards in what the verb sees
	// (nodeView; preempt.Holds), so that no verb hands a held card to another pod.
	holds bool
}

// verbTable declares the extender's verbs. Adding one is an entry here (and its verbID in
// extender.go) plus its handler below; its Extender method takes its view of the cache with
// Extender.nodeView. NewExtender builds the table once, into Extender.verbs.
//
// A follower forwards every verb to the leader, whose cache holds the pods it has assumed: a
// filter, prioritize or preempt the leader cannot answer in time is answered from the
// follower's own cache (the leader's bind checks the card again), while a bind waits for a
// leader, since only the leader binds (server.Forwarder).
func verbTable() [numVerbs]verb {
	leaderFirst := server.Forwarding{Mode: server.LeaderFirst}
	leaderOnly := server.Forwarding{Mode: server.LeaderOnly, Refused: notLeaderAnswer}
	return [numVerbs]verb{
		verbFilter:     {name: "filter", serve: (*Handler).filter, forward: leaderFirst, holds: true},
		verbPrioritize: {name: "prioritize", serve: (*Handler).prioritize, forward: leaderFirst, holds: true},
		verbBind:       {name: "bind", serve: (*Handler).bind, forward: leaderOnly, holds: true},
		// The preemption planner (package preempt) places through this verb's view, whether
		// the preemption came from this verb or from filter's background.
		verbPreempt: {name: "preempt", serve: (*Handler).preempt, forward: leaderFirst, holds: true},
	}
}

// Handler serves the extender over HTTP: each verb of verbTable, guarded and forwarded as the
// table says, and the routes to inspect and operate it.
type Handler struct {
	ext    *Extender
	cfg    HandlerConfig
	logger klog.Logger
	// ready answers the probes and holds the verbs back until the cache has synced.
	ready server.Readiness
	// budget bounds the request bodies of the verbs.
	budget *server.BodyBudget
	// forwarder, if set, forwards a follower's verbs to the leader.
	forwarder *server.Forwarder
	// metricsHandler serves the extender's metrics and its cache's state.
	metricsHandler http.Handler
	// buffers holds request bodies while they are decoded and answers while they are written.
	buffers wire.BufferPool
}

// HandlerConfig bounds and guards the extender's HTTP routes.
type HandlerConfig struct {
	// MaxBody is the largest request body accepted (413 beyond).
	MaxBody int64
	// MaxInflightBytes bounds the body bytes read and held by the requests being served at
	// once (server.BodyBudget); a request whose reading goes beyond it is refused with 503 and
	// retried by kube-scheduler, so hostile bodies cannot grow the extender without bound.
	// Zero means 4 x MaxBody.
	MaxInflightBytes int64
	// BodyTimeout bounds how long a request body may take to arrive (408 beyond); zero means
	// server.DefaultBodyTimeout.
	BodyTimeout time.Duration
	// MetricsTTL is how long one rendering of /metrics is served to every scrape (zero:
	// DefaultMetricsTTL; negative: every scrape renders).
	MetricsTTL time.Duration
	// Forward, if set, has a follower forward the verbs to the leader (server.Forwarder).
	Forward *server.ForwardConfig
	// RequireClientCert refuses the verbs, /inspect and /debug (401) unless the connection
	// presented a client certificate that TLS verified (server.TLSFiles.ClientCAFile). Probes,
	// /version and /metrics stay open.
	RequireClientCert bool
}

// NewHandler returns the HTTP routes of ext. ready reports whether the cache has synced.
func NewHandler(ext *Extender, ready func() bool, cfg HandlerConfig, logger klog.Logger) http.Handler {
	_, routes := newHandler(ext, ready, cfg, logger)
	return routes
}

// newHandler is NewHandler that also returns the Handler behind the routes.
func newHandler(ext *Extender, ready func() bool, cfg HandlerConfig, logger klog.Logger) (*Handler, http.Handler) {
	if cfg.MetricsTTL == 0 {
		cfg.MetricsTTL = DefaultMetricsTTL
	}
	h := &Handler{ext: ext, cfg: cfg, logger: logger,
		ready:  server.Readiness{Ready: ready, Leadership: ext.leadership},
		budget: server.NewBodyBudget(cfg.MaxBody, cfg.MaxInflightBytes, cfg.BodyTimeout)}
	if f := cfg.Forward; f != nil && ext.leadership != nil {
		h.forwarder = server.NewForwarder(*f, ext.Leading, cfg.MaxBody, ext.metrics.forwards, logger)
	}
	state := prometheus.NewRegistry()
	state.MustRegister(newStateCollector(ext))
	h.metricsHandler = &metricsHandler{gatherer: prometheus.Gatherers{ext.metrics.registry, state}, ext: ext, logger: logger, ttl: cfg.MetricsTTL}
	r := httprouter.New()
	for _, v := range ext.verbs {
		if v.serve == nil {
			continue // not offered in this mode (DRA mode: bind and preempt)
		}
		r.POST(Prefix+"/"+v.name, h.route(v))
	}
	r.GET(Prefix+"/inspect", h.authenticated(h.inspectAll))
	r.GET(Prefix+"/inspect/:node", h.authenticated(h.inspectNode))
	r.GET(Prefix+"/debug/audit", h.guarded(h.audit))
	r.GET("/healthz", h.ready.Healthz)
	r.GET("/readyz", h.ready.Readyz)
	r.GET("/readyz/leader", h.ready.ReadyzLeader)
	r.GET("/version", h.version)
	r.GET("/metrics", h.metrics)
	r.NotFound = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		server.WriteError(w, http.StatusNotFound, fmt.Errorf("no route %s", req.URL.Path))
	})
	r.MethodNotAllowed = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		server.WriteError(w, http.StatusMethodNotAllowed, fmt.Errorf("method %s is not allowed on %s", req.Method, req.URL.Path))
	})
	return h, r
}

// route is v's route: guarded, timed, and forwarded to the leader as v says while this replica
// follows.
func (h *Handler) route(v verb) httprouter.Handle {
	serve := func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) { v.serve(h, w, r, ps) }
	return h.guarded(h.timed(v.name, h.forwarder.Verb(v.name, v.forward, serve)))
}

// authenticated refuses a request with 401 unless RequireClientCert is off or TLS verified
// the client's certificate (server.RequireClientCert).
func (h *Handler) authenticated(handle httprouter.Handle) httprouter.Handle {
	if !h.cfg.RequireClientCert {
		return handle
	}
	return server.RequireClientCert(handle, h.ext.metrics.unauthenticated.Inc)
}

// guarded is authenticated, then held back until the cache has synced, then bounded by the
// body budget.
func (h *Handler) guarded(handle httprouter.Handle) httprouter.Handle {
	return h.authenticated(h.ready.WhenReady(h.budget.Bound(handle)))
}

// decode reads a JSON body into v (wire.Decode), answering 400 itself when it cannot (413
// when it is over MaxBody).
func (h *Handler) decode(w http.ResponseWriter, r *http.Request, v any) bool {
	body, err := server.ReadBody(w, r, h.cfg.MaxBody, h.buffers.Get())
	if err == nil {
		err = wire.Decode(body, v) // decoded values copy what they keep of the body
	}
	h.buffers.Put(body)
	if err != nil {
		server.BodyError(w, r, err)
		return false
	}
	return true
}

// decodeArgs reads a filter or prioritize body (wire.DecodeArgs), answering 400 itself when
// it cannot (413 when it is over MaxBody, 400 beyond MaxNodeNames candidates).
func (h *Handler) decodeArgs(w http.ResponseWriter, r *http.Request) (*extenderv1.ExtenderArgs, bool) {
	body, err := server.ReadBody(w, r, h.cfg.MaxBody, h.buffers.Get())
	var args *extenderv1.ExtenderArgs
	if err == nil {
		args, err = wire.DecodeArgs(body)
	}
	h.buffers.Put(body)
	if err != nil {
		server.BodyError(w, r, err)
		return nil, false
	}
	return args, h.fewEnoughNodes(w, r, args)
}

func (h *Handler) ctx(r *http.Request) context.Context {
	return klog.NewContext(r.Context(), h.logger)
}

func (h *Handler) filter(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	if args, ok := h.decodeArgs(w, r); ok {
		body, err := h.ext.appendFilter(h.ctx(r), h.buffers.Get(), args)
		server.WriteBody(w, http.StatusOK, body, err)
		h.buffers.Put(body)
	}
}

// fewEnoughNodes answers 400 itself when args name more than MaxNodeNames candidates.
func (h *Handler) fewEnoughNodes(w http.ResponseWriter, r *http.Request, args *extenderv1.ExtenderArgs) bool {
	n := 0
	if args.NodeNames != nil {
		n = len(*args.NodeNames)
	}
	if args.Nodes != nil {
		n = max(n, len(args.Nodes.Items))
	}
	return h.atMostMaxNodes(w, r, n)
}

// atMostMaxNodes answers 400 itself when a request names n > MaxNodeNames candidates.
func (h *Handler) atMostMaxNodes(w http.ResponseWriter, r *http.Request, n int) bool {
	if n > MaxNodeNames {
		server.WriteError(w, http.StatusBadRequest, fmt.Errorf("malformed %s request: %d candidate nodes, at most %d are accepted", r.URL.Path, n, MaxNodeNames))
		return false
	}
	return true
}

func (h *Handler) prioritize(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	args, ok := h.decodeArgs(w, r)
	if !ok {
		return
	}
	list, err := h.ext.Prioritize(h.ctx(r), args)
	if err != nil {
		server.WriteError(w, http.StatusBadRequest, err)
		return
	}
	server.WriteJSON(w, http.StatusOK, list)
}

func (h *Handler) bind(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	var args extenderv1.ExtenderBindingArgs
	if !h.decode(w, r, &args) {
		return
	}
	if args.PodName == "" || args.PodNamespace == "" || args.Node == "" {
		server.WriteError(w, http.StatusBadRequest, errors.New("malformed bind request: podName, podNamespace and node are required"))
		return
	}
	res := &extenderv1.ExtenderBindingResult{}
	if err := h.ext.BindGang(h.ctx(r), &args); err != nil {
		h.ext.metrics.bindFailures.Add(1)
		h.logger.Info("Bind failed", "pod", args.PodNamespace+"/"+args.PodName, "node", args.Node, "err", err)
		res.Error = wire.EscapeFormat(err.Error()) // kube-scheduler formats it (wire.EscapeFormat)
	}
	server.WriteJSON(w, http.StatusOK, res)
}

func (h *Handler) preempt(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	var args extenderv1.ExtenderPreemptionArgs
	if !h.decode(w, r, &args) || !h.atMostMaxNodes(w, r, len(args.NodeNameToVictims)+len(args.NodeNameToMetaVictims)) {
		return
	}
	server.WriteJSON(w, http.StatusOK, h.ext.Preempt(h.ctx(r), &args))
}

func (h *Handler) inspectAll(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) {
	server.WriteJSON(w, http.StatusOK, Inspect(h.ext.cache.Nodes(), h.ext.names.UnitLabel()))
}

func (h *Handler) inspectNode(w http.ResponseWriter, _ *http.Request, ps httprouter.Params) {
	node, ok := h.ext.cache.Node(ps.ByName("node"))
	if !ok {
		server.WriteError(w, http.StatusNotFound, fmt.Errorf("node %q is not known to the extender", ps.ByName("node")))
		return
	}
	server.WriteJSON(w, http.StatusOK, node)
}

func (h *Handler) version(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) {
	server.WriteJSON(w, http.StatusOK, map[string]string{"version": version.Version, "commit": version.Commit, "policy": h.ext.policy.Name()})
}

func (h *Handler) metrics(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	h.metricsHandler.ServeHTTP(w, r)
}

// timed observes how long handle takes in gpushare_extender_request_duration_seconds.
func (h *Handler) timed(verb string, handle httprouter.Handle) httprouter.Handle {
	observer := h.ext.metrics.duration.WithLabelValues(verb)
	return func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
		start := time.Now()
		handle(w, r, ps)
		observer.Observe(time.Since(start).Seconds())
	}
}

// audit answers the invariant check: cards over capacity and every difference between the
// cache and the API server's nodes and pods (200 either way; 502 when the API cannot be read).
func (h *Handler) audit(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	report, err := h.ext.Audit(h.ctx(r))
	if err != nil {
		server.WriteError(w, http.StatusBadGateway, err)
		return
	}
	server.WriteJSON(w, http.StatusOK, report)
}

// notLeaderAnswer is fence.ErrNotLeader when a bind answer is a refusal for not leading, nil
// otherwise: a follower that forwarded the bind then looks for the new leader.
func notLeaderAnswer(answer []byte) error {
	if !bytes.Contains(answer, []byte(fence.ErrNotLeader.Error())) {
		return nil
	}
	var res extenderv1.ExtenderBindingResult
	if wire.Decode(answer, &res) == nil && strings.Contains(res.Error, fence.ErrNotLeader.Error()) {
		return fence.ErrNotLeader
	}
	return nil
}
