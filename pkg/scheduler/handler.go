package scheduler

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/julienschmidt/httprouter"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

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

// inflightBodies is how many largest bodies may be read at once (HandlerConfig.MaxInflightBytes
// defaults to this many MaxBody).
const inflightBodies = 4

// Handler serves the extender over HTTP.
type Handler struct {
	ext    *Extender
	ready  func() bool
	cfg    HandlerConfig
	logger klog.Logger
	// inflight is the body bytes read and held by the requests being served (bounded).
	inflight atomic.Int64
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
	// once (body_budget.go); a request whose reading goes beyond it is refused with 503 and
	// retried by kube-scheduler, so hostile bodies cannot grow the extender without bound.
	// Zero means 4 x MaxBody.
	MaxInflightBytes int64
	// BodyTimeout bounds how long a request body may take to arrive (408 beyond); zero means
	// DefaultBodyTimeout.
	BodyTimeout time.Duration
	// MetricsTTL is how long one rendering of /metrics is served to every scrape (zero:
	// DefaultMetricsTTL; negative: every scrape renders).
	MetricsTTL time.Duration
	// Forward, if set, has a follower forward the verbs to the leader (forward.go).
	Forward *ForwardConfig
	// RequireClientCert refuses the verbs, /inspect and /debug (401) unless the connection
	// presented a client certificate that TLS verified (TLSFiles.ClientCAFile). Probes,
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
	if cfg.MaxInflightBytes <= 0 {
		cfg.MaxInflightBytes = inflightBodies * cfg.MaxBody
	}
	if cfg.BodyTimeout <= 0 {
		cfg.BodyTimeout = DefaultBodyTimeout
	}
	if cfg.MetricsTTL == 0 {
		cfg.MetricsTTL = DefaultMetricsTTL
	}
	h := &Handler{ext: ext, ready: ready, cfg: cfg, logger: logger}
	state := prometheus.NewRegistry()
	state.MustRegister(newStateCollector(ext))
	h.metricsHandler = &metricsHandler{gatherer: prometheus.Gatherers{ext.metrics.registry, state}, ext: ext, logger: logger, ttl: cfg.MetricsTTL}
	r := httprouter.New()
	r.POST(Prefix+"/filter", h.guarded(h.timed("filter", h.forwardedVerb("filter", h.filter))))
	r.POST(Prefix+"/prioritize", h.guarded(h.timed("prioritize", h.forwardedVerb("prioritize", h.prioritize))))
	r.POST(Prefix+"/bind", h.guarded(h.timed("bind", h.forwardedVerb("bind", h.bind))))
	r.POST(Prefix+"/preempt", h.guarded(h.timed("preempt", h.forwardedVerb("preempt", h.preempt))))
	r.GET(Prefix+"/inspect", h.authenticated(h.inspectAll))
	r.GET(Prefix+"/inspect/:node", h.authenticated(h.inspectNode))
	r.GET(Prefix+"/debug/audit", h.guarded(h.audit))
	r.GET("/healthz", h.healthz)
	r.GET("/readyz", h.readyz)
	r.GET("/readyz/leader", h.readyzLeader)
	r.GET("/version", h.version)
	r.GET("/metrics", h.metrics)
	r.NotFound = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		writeError(w, http.StatusNotFound, fmt.Errorf("no route %s", req.URL.Path))
	})
	r.MethodNotAllowed = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		writeError(w, http.StatusMethodNotAllowed, fmt.Errorf("method %s is not allowed on %s", req.Method, req.URL.Path))
	})
	return h, r
}

// ErrNotSynced answers every verb until the cache has synced with the API server: a cache that
// has the nodes but not yet all their pods would see used cards as free.
var ErrNotSynced = errors.New("the extender's cache has not synced with the API server yet; retry shortly")

// ErrNoClientCert answers a guarded route called without a verified client certificate.
var ErrNoClientCert = errors.New("a client certificate signed by the extender's --client-ca-file is required")

// authenticated refuses a request with 401 unless RequireClientCert is off or TLS verified
// the client's certificate.
func (h *Handler) authenticated(handle httprouter.Handle) httprouter.Handle {
	if !h.cfg.RequireClientCert {
		return handle
	}
	return func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
		if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 {
			h.ext.metrics.unauthenticated.Add(1)
			writeError(w, http.StatusUnauthorized, fmt.Errorf("%s: %w", r.URL.Path, ErrNoClientCert))
			return
		}
		handle(w, r, ps)
	}
}

// guarded is authenticated, then whenSynced, then bounded.
func (h *Handler) guarded(handle httprouter.Handle) httprouter.Handle {
	return h.authenticated(h.whenSynced(h.bounded(handle)))
}

// ErrBusy answers a request whose body would take the body bytes held by the requests being
// served past MaxInflightBytes.
var ErrBusy = errors.New("the extender is serving too many large requests; retry shortly")

// whenSynced refuses a request with 503 until the cache has synced.
func (h *Handler) whenSynced(handle httprouter.Handle) httprouter.Handle {
	return func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
		if !h.ready() {
			writeError(w, http.StatusServiceUnavailable, fmt.Errorf("%s: %w", r.URL.Path, ErrNotSynced))
			return
		}
		handle(w, r, ps)
	}
}

// decode reads a JSON body into v (wire.Decode), answering 400 itself when it cannot (413
// when it is over MaxBody).
func (h *Handler) decode(w http.ResponseWriter, r *http.Request, v any) bool {
	body, err := readBody(w, r, h.cfg.MaxBody, h.buffers.Get())
	if err == nil {
		err = wire.Decode(body, v) // decoded values copy what they keep of the body
	}
	h.buffers.Put(body)
	if err != nil {
		h.bodyError(w, r, err)
		return false
	}
	return true
}

// decodeArgs reads a filter or prioritize body (wire.DecodeArgs), answering 400 itself when
// it cannot (413 when it is over MaxBody, 400 beyond MaxNodeNames candidates).
func (h *Handler) decodeArgs(w http.ResponseWriter, r *http.Request) (*extenderv1.ExtenderArgs, bool) {
	body, err := readBody(w, r, h.cfg.MaxBody, h.buffers.Get())
	var args *extenderv1.ExtenderArgs
	if err == nil {
		args, err = wire.DecodeArgs(body)
	}
	h.buffers.Put(body)
	if err != nil {
		h.bodyError(w, r, err)
		return nil, false
	}
	return args, h.fewEnoughNodes(w, r, args)
}

// bodyError answers a request whose body could not be read or decoded: 413 over MaxBody, 503
// over the in-flight budget, 408 when it did not arrive in time, 400 otherwise.
func (h *Handler) bodyError(w http.ResponseWriter, r *http.Request, err error) {
	status := http.StatusBadRequest
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		status = http.StatusRequestEntityTooLarge
	case errors.Is(err, ErrBusy):
		status = http.StatusServiceUnavailable
	case errors.Is(err, ErrBodyTimeout):
		status = http.StatusRequestTimeout
	}
	what := "malformed " + r.URL.Path + " request"
	if status != http.StatusBadRequest {
		what = r.URL.Path
	}
	writeError(w, status, fmt.Errorf("%s: %w", what, err))
}

// preallocBody is the largest announced body readBody allocates before reading it: an
// announcement costs the client nothing, so larger bodies grow their buffer as they arrive.
const preallocBody = 1 << 20

// readBody reads r's whole body, at most limit bytes (an *http.MaxBytesError beyond), into
// into's storage when it is large enough.
func readBody(w http.ResponseWriter, r *http.Request, limit int64, into []byte) ([]byte, error) {
	buf := bytes.NewBuffer(into[:0])
	if n := r.ContentLength; n > 0 && n <= min(limit, preallocBody) {
		buf.Grow(int(n) + bytes.MinRead) // one allocation when the length is announced
	}
	_, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, limit))
	return buf.Bytes(), err
}

func (h *Handler) ctx(r *http.Request) context.Context {
	return klog.NewContext(r.Context(), h.logger)
}

func (h *Handler) filter(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	if args, ok := h.decodeArgs(w, r); ok {
		body, err := h.ext.appendFilter(h.ctx(r), h.buffers.Get(), args)
		writeBodyStatus(w, http.StatusOK, body, err)
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
		writeError(w, http.StatusBadRequest, fmt.Errorf("malformed %s request: %d candidate nodes, at most %d are accepted", r.URL.Path, n, MaxNodeNames))
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
		writeError(w, http.StatusBadRequest, err)
		return
	}
	writeJSON(w, http.StatusOK, list)
}

func (h *Handler) bind(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	var args extenderv1.ExtenderBindingArgs
	if !h.decode(w, r, &args) {
		return
	}
	if args.PodName == "" || args.PodNamespace == "" || args.Node == "" {
		writeError(w, http.StatusBadRequest, errors.New("malformed bind request: podName, podNamespace and node are required"))
		return
	}
	res := &extenderv1.ExtenderBindingResult{}
	if err := h.ext.BindGang(h.ctx(r), &args); err != nil {
		h.ext.metrics.bindFailures.Add(1)
		h.logger.Info("Bind failed", "pod", args.PodNamespace+"/"+args.PodName, "node", args.Node, "err", err)
		res.Error = wire.EscapeFormat(err.Error()) // kube-scheduler formats it (wire.EscapeFormat)
	}
	writeJSON(w, http.StatusOK, res)
}

func (h *Handler) preempt(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	var args extenderv1.ExtenderPreemptionArgs
	if !h.decode(w, r, &args) || !h.atMostMaxNodes(w, r, len(args.NodeNameToVictims)+len(args.NodeNameToMetaVictims)) {
		return
	}
	writeJSON(w, http.StatusOK, h.ext.Preempt(h.ctx(r), &args))
}

func (h *Handler) inspectAll(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) {
	writeJSON(w, http.StatusOK, Inspect(h.ext.cache.Nodes(), h.ext.names.UnitLabel()))
}

func (h *Handler) inspectNode(w http.ResponseWriter, _ *http.Request, ps httprouter.Params) {
	node, ok := h.ext.cache.Node(ps.ByName("node"))
	if !ok {
		writeError(w, http.StatusNotFound, fmt.Errorf("node %q is not known to the extender", ps.ByName("node")))
		return
	}
	writeJSON(w, http.StatusOK, node)
}

func (h *Handler) healthz(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (h *Handler) readyz(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) {
	if !h.ready() {
		writeError(w, http.StatusServiceUnavailable, errors.New("informers have not synced yet"))
		return
	}
	body := map[string]string{"status": "ready"}
	if l := h.ext.leadership; l != nil { // say who binds; followers stay ready for filter and prioritize
		body["leading"], body["leader"] = fmt.Sprint(l.Leading()), l.Leader()
	}
	writeJSON(w, http.StatusOK, body)
}

// readyzLeader answers 200 only on a ready replica that leads (or runs without leader
// election), 503 elsewhere. It is for a front that balances each request and checks its
// backends' health itself (Envoy, HAProxy): checking this path, it sends the verbs to the
// leader alone and no call takes the follower's extra hop. Kubernetes' readiness probe keeps
// /readyz, so that followers stay Ready for rollouts and the Service.
func (h *Handler) readyzLeader(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	if h.ready() && !h.ext.Leading() {
		writeError(w, http.StatusServiceUnavailable, fmt.Errorf("this replica follows; the leader is %q", h.ext.leadership.Leader()))
		return
	}
	h.readyz(w, r, ps)
}

func (h *Handler) version(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) {
	writeJSON(w, http.StatusOK, map[string]string{"version": version.Version, "commit": version.Commit, "policy": h.ext.policy.Name()})
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
		writeError(w, http.StatusBadGateway, err)
		return
	}
	writeJSON(w, http.StatusOK, report)
}

// errorBody is the JSON of every error answer.
type errorBody struct {
	Error string `json:"error"`
}

func writeError(w http.ResponseWriter, status int, err error) {
	writeJSON(w, status, errorBody{Error: err.Error()})
}

// writeJSON answers v as JSON with its Content-Length. Without it a large answer goes out
// chunked, and kube-scheduler, which decodes the JSON value and closes the body without reading
// the closing chunk, then closes the connection instead of reusing it: a new TLS handshake for
// nearly every call.
func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	writeBodyStatus(w, status, body, err)
}

// writeBodyStatus answers status with an encoded JSON body, or 500 if encoding failed.
func writeBodyStatus(w http.ResponseWriter, status int, body []byte, err error) {
	if err != nil {
		status, body = http.StatusInternalServerError, []byte(`{"error":"encoding the answer failed"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
