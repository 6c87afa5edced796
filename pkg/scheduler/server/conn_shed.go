package server

import (
	"context"
	"net"
	"sync/atomic"
	"time"
)

// DefaultShedAfter is how long a follower forwards on one connection before it closes it
// (forward.go): long enough that a front balancing requests reopens its connection to a
// follower at most once a second, short enough that kube-scheduler leaves a follower within a
// second or two.
const DefaultShedAfter = time.Second

// connState is what the server keeps of one client connection.
type connState struct {
	// forwardingSince is when this replica first forwarded a call of the connection to the
	// leader (Unix nanoseconds; 0 none yet).
	forwardingSince atomic.Int64
}

type connStateKey struct{}

// ConnContext gives each connection's requests a connState (http.Server.ConnContext); Serve
// sets it.
func ConnContext(ctx context.Context, _ net.Conn) context.Context {
	return context.WithValue(ctx, connStateKey{}, &connState{})
}

// connShed records that a call of ctx's connection is being forwarded at now and reports
// whether the connection has been forwarding for after, so that the answer should close it. A
// request served without ConnContext is never shed.
func connShed(ctx context.Context, now time.Time, after time.Duration) bool {
	c, ok := ctx.Value(connStateKey{}).(*connState)
	if !ok {
		return false
	}
	since := c.forwardingSince.Load()
	if since == 0 {
		c.forwardingSince.CompareAndSwap(0, now.UnixNano())
		return false
	}
	return now.UnixNano()-since >= after.Nanoseconds()
}
