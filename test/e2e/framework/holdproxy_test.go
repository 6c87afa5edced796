package framework

import (
	"io"
	"net"
	"testing"
	"time"
)

// TestHoldingProxy: while held, what a client writes does not reach the target and the
// connection stays open; Release delivers it, in order; replies pass at all times.
func TestHoldingProxy(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	got := make(chan []byte, 8)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer func() { _ = c.Close() }()
		buf := make([]byte, 64)
		for {
			n, err := c.Read(buf)
			if n > 0 {
				got <- append([]byte(nil), buf[:n]...)
				_, _ = c.Write([]byte("ack"))
			}
			if err != nil {
				return
			}
		}
	}()
	p, err := StartHoldingProxy(ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := net.Dial("tcp", p.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	for _, tc := range []struct {
		name string
		held bool
	}{{"passes", false}, {"held, then released", true}} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.held {
				p.Hold()
			}
			if _, err := c.Write([]byte(tc.name)); err != nil {
				t.Fatal(err)
			}
			select {
			case b := <-got:
				if tc.held {
					t.Fatalf("%q reached the target while held", b)
				}
			case <-time.After(200 * time.Millisecond):
				if !tc.held {
					t.Fatal("nothing reached the target")
				}
				if n := p.Waiting(); n != 1 {
					t.Fatalf("Waiting() = %d while one write is held, want 1", n)
				}
				p.Release()
				if b := <-got; string(b) != tc.name {
					t.Fatalf("released %q, want %q", b, tc.name)
				}
			}
			ack := make([]byte, 3)
			if _, err := io.ReadFull(c, ack); err != nil || string(ack) != "ack" {
				t.Fatalf("reply %q, %v", ack, err)
			}
			if n := p.Waiting(); n != 0 {
				t.Fatalf("Waiting() = %d after the write went through, want 0", n)
			}
		})
	}
}
