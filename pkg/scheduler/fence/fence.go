package fence

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/scheduler/server"
)

// Policy is the name of the ValidatingAdmissionPolicy that refuses the extender's Bindings and
// pod patches whose fence token is not the Lease's (config/admission/extender-fence.yaml).
const Policy = "gpushare-extender-fence"

// ErrNotLeader: this extender replica does not bind; another one leads.
var ErrNotLeader = errors.New("this extender replica is not the leader")

// Fencer is a server.Leadership that also tells the fence of the term it leads in. The writes
// carry its token and go with its deadline (Writer).
type Fencer interface {
	// Fence returns the current term's fence; false when this replica does not lead now.
	Fence() (server.Fence, bool)
}

var _ Fencer = (*server.Elector)(nil)

// lagging is a server.Leadership that may hold the Lease before it leads (server.Elector's
// fence lag).
type lagging interface {
	LagLeft() time.Duration
}

// Writer writes to the API server under the fence of the term this replica leads in. The zero
// value's client is nil: it fences, but cannot patch.
type Writer struct {
	client kubernetes.Interface
	// leadership, if set, says whether this replica leads (and, as a Fencer, in which term);
	// nil means leader election is off and the replica always writes, without a token.
	leadership server.Leadership
}

// NewWriter returns a Writer through client, leading as leadership says (nil: always, without
// a token).
func NewWriter(client kubernetes.Interface, leadership server.Leadership) Writer {
	return Writer{client: client, leadership: leadership}
}

// Leading reports whether this replica writes: it leads, or runs without leader election.
func (w Writer) Leading() bool { return w.leadership == nil || w.leadership.Leading() }

// Context returns ctx bounded by the fence of the term this replica leads in and the fence
// token to put on the write, "" when the replica has no fence (leader election off): what
// waits in client-go's rate limiter past the deadline is dropped before it is sent, and the
// API server refuses the token once another replica has taken the Lease. A replica that does
// not lead now gets ErrNotLeader and sends nothing. The caller calls cancel.
func (w Writer) Context(ctx context.Context) (fctx context.Context, cancel context.CancelFunc, token string, err error) {
	f, ok := w.leadership.(Fencer)
	if !ok {
		if !w.Leading() {
			return ctx, func() {}, "", fmt.Errorf("%w (leadership not current; leader: %q)", ErrNotLeader, w.leadership.Leader())
		}
		return ctx, func() {}, "", nil
	}
	fence, ok := f.Fence()
	if !ok {
		return ctx, func() {}, "", fmt.Errorf("%w (leadership not current; leader: %q)", ErrNotLeader, w.leadership.Leader())
	}
	fctx, cancel = context.WithDeadline(ctx, fence.Deadline)
	return fctx, cancel, fence.Token, nil
}

// WaitLag waits, when this replica has just acquired the Lease and waits out its fence lag,
// until the lag is over or ctx ends, and reports whether it leads then. A bind forwarded to a
// new leader inside its lag is thus bound, not refused.
func (w Writer) WaitLag(ctx context.Context) bool {
	l, ok := w.leadership.(lagging)
	if !ok {
		return w.Leading()
	}
	if d := l.LagLeft(); d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
		case <-t.C:
		}
	}
	return w.Leading()
}

// PatchPod merges ann into the annotations of the pod namespace/name whose UID is uid (the
// patch names the UID: a pod recreated under that name is not touched; a nil value removes an
// annotation), carrying the fence token as every write of the leader does: a replica that does
// not lead now sends nothing (ErrNotLeader), the patch is dropped unsent past the fence, and
// the API server refuses it once another replica holds the Lease.
func (w Writer) PatchPod(ctx context.Context, namespace, name string, uid types.UID, ann map[string]any) error {
	ctx, cancel, token, err := w.Context(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	fenced := make(map[string]any, len(ann)+1)
	maps.Copy(fenced, ann)
	if token != "" {
		fenced[contract.AnnotationFence] = token
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"uid": uid, "annotations": fenced}})
	if err != nil {
		return fmt.Errorf("encode the patch of %s/%s: %w", namespace, name, err)
	}
	_, err = w.client.CoreV1().Pods(namespace).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	return err //nolint:wrapcheck // the callers say what they patched
}

// WithToken returns ann with the fence token added, ann itself when token is "".
func WithToken(ann map[string]string, token string) map[string]string {
	if token == "" {
		return ann
	}
	out := make(map[string]string, len(ann)+1)
	maps.Copy(out, ann)
	out[contract.AnnotationFence] = token
	return out
}

// Refused reports whether err is the API server's refusal of a write whose fence token is not
// the Lease's: a 403 from Policy. The API server names the policy that denied only in the
// message, so the message is what tells it from other refusals; it serves the logs and
// gpushare_bind_fence_refused_total, never a decision (any 4xx proves a Binding unbound).
func Refused(err error) bool {
	var status apierrors.APIStatus
	return apierrors.IsForbidden(err) && errors.As(err, &status) && strings.Contains(status.Status().Message, "'"+Policy+"'")
}
