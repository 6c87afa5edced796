package fence_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gpushare/gpushare/pkg/scheduler/fence"
	"github.com/gpushare/gpushare/pkg/scheduler/server"
)

// fixedFencer leads, or not, with a fixed fence.
type fixedFencer struct {
	fence   server.Fence
	leading bool
}

func (f fixedFencer) Leading() bool               { return f.leading }
func (f fixedFencer) Leader() string              { return "a" }
func (f fixedFencer) Fence() (server.Fence, bool) { return f.fence, f.leading }

// TestContext: a fenced leader's writes go with its token and a context that ends at its
// fence's deadline (what still waits in client-go's rate limiter then is dropped unsent); a
// replica without a fence (election off) sends no token and keeps the caller's context; one
// that does not lead sends nothing.
func TestContext(t *testing.T) {
	deadline := time.Now().Add(time.Minute)
	for _, tc := range []struct {
		name         string
		leadership   server.Leadership
		wantToken    string
		wantDeadline bool
		wantErr      error
	}{
		{name: "election off", leadership: nil},
		{name: "leader", leadership: fixedFencer{fence: server.Fence{Token: "a/2", Deadline: deadline}, leading: true}, wantToken: "a/2", wantDeadline: true},
		{name: "not leading", leadership: fixedFencer{}, wantErr: fence.ErrNotLeader},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel, token, err := fence.NewWriter(nil, tc.leadership).Context(context.Background())
			defer cancel()
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Context() error %v, want %v", err, tc.wantErr)
			}
			got, has := ctx.Deadline()
			if token != tc.wantToken || has != tc.wantDeadline || (has && !got.Equal(deadline)) {
				t.Errorf("Context() = token %q, deadline %v (%v), want %q, %v (%v)", token, got, has, tc.wantToken, deadline, tc.wantDeadline)
			}
		})
	}
}
