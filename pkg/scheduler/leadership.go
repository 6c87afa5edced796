package scheduler

import (
	"bytes"
	"errors"
	"strings"

	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/gpushare/gpushare/pkg/scheduler/server"
	"github.com/gpushare/gpushare/pkg/scheduler/wire"
)

// ErrNotLeader: this extender replica does not bind; another one leads.
var ErrNotLeader = errors.New("this extender replica is not the leader")

// Leadership says whether this extender replica is the one that binds (server.Leadership;
// server.Elector implements it). Any number of replicas may answer filter and prioritize from
// their caches; only the leader binds, so only one of them ever charges cards.
type Leadership = server.Leadership

// Fence is the fence of a term this replica leads in: the token its writes carry and when the
// term ends by its clock (server.Fence).
type Fence = server.Fence

// Fencer is a Leadership that also tells the fence of the term it leads in. The extender
// puts the token on every Binding and pod patch, and sends them with the deadline (fence.go).
type Fencer interface {
	// Fence returns the current term's fence; false when this replica does not lead now.
	Fence() (Fence, bool)
}

var _ Fencer = (*server.Elector)(nil)

// FenceToken is the token of a Lease record, "holder/transitions", as the fence policy
// (FencePolicy) compares it with the Lease: server.FenceToken, which the elector writes.
func FenceToken(holder string, transitions int) string {
	return server.FenceToken(holder, transitions)
}

// DefaultElectionConfig is the shipped leader election, server.DefaultElectionConfig: its
// Lease is the fence policy's param (config/admission/extender-fence.yaml).
func DefaultElectionConfig() server.ElectionConfig { return server.DefaultElectionConfig() }

// notLeaderAnswer is ErrNotLeader when a bind answer is a refusal for not leading, nil
// otherwise: a follower that forwarded the bind then looks for the new leader.
func notLeaderAnswer(answer []byte) error {
	if !bytes.Contains(answer, []byte(ErrNotLeader.Error())) {
		return nil
	}
	var res extenderv1.ExtenderBindingResult
	if wire.Decode(answer, &res) == nil && strings.Contains(res.Error, ErrNotLeader.Error()) {
		return ErrNotLeader
	}
	return nil
}
