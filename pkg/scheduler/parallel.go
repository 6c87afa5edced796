package scheduler

import (
	"runtime"
	"sync"
)

// minChunk is the fewest nodes worth a goroutine of their own.
const minChunk = 256

// parallelize calls work on consecutive chunks of [0, n), on up to GOMAXPROCS goroutines, and
// returns when all are done. work must only write to what its own chunk owns.
func parallelize(n int, work func(lo, hi int)) {
	workers := min(runtime.GOMAXPROCS(0), (n+minChunk-1)/minChunk)
	if workers <= 1 {
		work(0, n)
		return
	}
	var wg sync.WaitGroup
	size := (n + workers - 1) / workers
	for lo := size; lo < n; lo += size {
		wg.Add(1)
		go func(lo, hi int) {
			defer wg.Done()
			work(lo, hi)
		}(lo, min(lo+size, n))
	}
	work(0, min(size, n)) // the first chunk on the caller's goroutine
	wg.Wait()
}
