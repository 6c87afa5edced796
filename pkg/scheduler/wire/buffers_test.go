package wire

import "testing"

// TestBufferPool: Get hands out empty slices, never one over maxPooledBytes.
func TestBufferPool(t *testing.T) {
	var p BufferPool
	if b := p.Get(); len(b) != 0 {
		t.Fatalf("Get of an empty pool = %d bytes, want none", len(b))
	}
	p.Put(make([]byte, 10, 64))
	p.Put(make([]byte, 0, maxPooledBytes+1))
	for range 3 {
		b := p.Get()
		if len(b) != 0 || cap(b) > maxPooledBytes {
			t.Fatalf("Get = len %d cap %d, want empty and at most %d", len(b), cap(b), maxPooledBytes)
		}
	}
}
