package sim

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"io"
	"math"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// Plot geometry: the allocation curve over arrived plotXMin..plotXMax % with the ideal diagonal,
// y from plotYMin to plotYMax % (below, every policy follows the diagonal).
const (
	plotW, plotH        = 720, 460
	plotLeft, plotRight = 60, 170
	plotTop, plotBottom = 30, 50
	plotXMin, plotXMax  = 60.0, 130.0
	plotYMin, plotYMax  = 75.0, 100.0
)

// plotColors are the lines' colours, in policy order.
func plotColors() []color.RGBA {
	return []color.RGBA{{0xd6, 0x27, 0x28, 255}, {0x1f, 0x77, 0xb4, 255}, {0x2c, 0xa0, 0x2c, 255},
		{0xff, 0x7f, 0x0e, 255}, {0x94, 0x67, 0xbd, 255}, {0x8c, 0x56, 0x4b, 255}, {0x7f, 0x7f, 0x7f, 255}}
}

// canvas is the plot area mapping of an RGBA image.
type canvas struct{ img *image.RGBA }

func (c canvas) x(arrived float64) float64 {
	return plotLeft + (arrived-plotXMin)/(plotXMax-plotXMin)*float64(plotW-plotLeft-plotRight)
}

func (c canvas) y(alloc float64) float64 {
	return float64(plotH-plotBottom) - (alloc-plotYMin)/(plotYMax-plotYMin)*float64(plotH-plotTop-plotBottom)
}

// Plot draws each summary's mean allocation curve (allocated % against arrived %) as a PNG.
func Plot(w io.Writer, sums []*Summary) error {
	c := canvas{img: image.NewRGBA(image.Rect(0, 0, plotW, plotH))}
	draw.Draw(c.img, c.img.Bounds(), image.White, image.Point{}, draw.Src)
	c.axes()
	c.line(plotYMin, plotYMin, plotYMax, plotYMax, color.RGBA{0xbb, 0xbb, 0xbb, 255}) // ideal
	for i, s := range sums {
		col := plotColors()[i%len(plotColors())]
		c.curve(s.Curve(), col)
		label := fmt.Sprintf("%s %.2f", s.Policy, s.AllocAt100.Mean)
		ly := plotTop + 10 + 18*i
		c.fill(plotW-plotRight+10, ly-4, plotW-plotRight+30, ly-1, col)
		c.text(plotW-plotRight+34, ly, label, color.Black)
	}
	if len(sums) > 0 {
		c.text(plotLeft, 18, "trace "+sums[0].Trace+": GPU allocated % vs arrived % (legend: alloc@100)", color.Black)
	}
	if err := png.Encode(w, c.img); err != nil {
		return fmt.Errorf("encode png: %w", err)
	}
	return nil
}

// axes draws the frame, grid and tick labels.
func (c canvas) axes() {
	grid, ink := color.RGBA{0xee, 0xee, 0xee, 255}, color.RGBA{0x33, 0x33, 0x33, 255}
	for a := plotXMin; a <= plotXMax; a += 10 {
		c.line(a, plotYMin, a, plotYMax, grid)
		c.text(int(c.x(a))-8, plotH-plotBottom+16, fmt.Sprint(a), ink)
	}
	for v := plotYMin; v <= plotYMax; v += 5 {
		c.line(plotXMin, v, plotXMax, v, grid)
		c.text(plotLeft-28, int(c.y(v))+4, fmt.Sprint(v), ink)
	}
	c.line(plotXMin, plotYMin, plotXMax, plotYMin, ink)
	c.line(plotXMin, plotYMin, plotXMin, plotYMax, ink)
	c.text(plotLeft+(plotW-plotLeft-plotRight)/2-40, plotH-12, "arrived GPU request, % of capacity", ink)
}

// curve draws a polyline through the points that are inside the y range.
func (c canvas) curve(pts []Stat, col color.RGBA) {
	for a := 1; a < len(pts); a++ {
		y0, y1 := pts[a-1].Mean, pts[a].Mean
		if math.IsNaN(y0) || math.IsNaN(y1) || y0 < plotYMin || y1 < plotYMin || float64(a-1) < plotXMin {
			continue
		}
		c.thick(float64(a-1), y0, float64(a), y1, col)
	}
}

func (c canvas) thick(a0, v0, a1, v1 float64, col color.RGBA) {
	for _, d := range []float64{-0.7, 0, 0.7} {
		c.pixLine(c.x(a0), c.y(v0)+d, c.x(a1), c.y(v1)+d, col)
	}
}

// line draws in data coordinates.
func (c canvas) line(a0, v0, a1, v1 float64, col color.RGBA) {
	c.pixLine(c.x(a0), c.y(v0), c.x(a1), c.y(v1), col)
}

// pixLine draws a straight line between pixel positions by sampling.
func (c canvas) pixLine(x0, y0, x1, y1 float64, col color.RGBA) {
	n := int(math.Max(math.Abs(x1-x0), math.Abs(y1-y0))) + 1
	for i := 0; i <= n; i++ {
		t := float64(i) / float64(n)
		c.img.SetRGBA(int(math.Round(x0+(x1-x0)*t)), int(math.Round(y0+(y1-y0)*t)), col)
	}
}

func (c canvas) fill(x0, y0, x1, y1 int, col color.RGBA) {
	draw.Draw(c.img, image.Rect(x0, y0, x1, y1), &image.Uniform{C: col}, image.Point{}, draw.Src)
}

func (c canvas) text(x, y int, s string, col color.Color) {
	d := font.Drawer{Dst: c.img, Src: image.NewUniform(col), Face: basicfont.Face7x13, Dot: fixed.P(x, y)}
	d.DrawString(s)
}
