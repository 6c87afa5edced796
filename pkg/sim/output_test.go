package sim

import (
	"bytes"
	"image/png"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func testSummary() *Summary {
	r1 := &Result{Curve: []float64{0, 50, 90}, Submitted: 3, CapacityMilli: 2000, Seconds: 1}
	r2 := &Result{Curve: []float64{0, 50, 80}, Submitted: 5, CapacityMilli: 2000, Seconds: 3}
	return Summarise("p", "t", []int{1, 2}, []*Result{r1, r2})
}

func TestSummarise(t *testing.T) {
	s := testSummary()
	want := []Stat{{0, 0}, {50, 0}, {85, round2(math.Sqrt(50))}}
	if diff := cmp.Diff(want, s.Curve()); diff != "" {
		t.Errorf("Curve (-want,+got):\n%s", diff)
	}
	if s.PodsSubmitted != 4 || s.Seconds != 2 {
		t.Errorf("pods %d, seconds %v; want the means 4 and 2", s.PodsSubmitted, s.Seconds)
	}
}

func TestCurveBuilder(t *testing.T) {
	c := newCurveBuilder(1000)
	for _, e := range [][2]int64{{100, 100}, {100, 200}, {190, 100}, {210, 200}, {300, 200}} {
		c.add(e[0], e[1])
	}
	// bin 10: mean of two events; bin 20 empty: the events of bins 19 and 21; bin 25: none near.
	want := []float64{15, 15, math.NaN()}
	got := c.build()
	if diff := cmp.Diff(want, []float64{got[10], got[20], got[25]}, cmpopts.EquateNaNs()); diff != "" {
		t.Errorf("curve (-want,+got):\n%s", diff)
	}
}

func TestWriteCurvesAndPlot(t *testing.T) {
	var csv, img bytes.Buffer
	if err := WriteCurves(&csv, []*Summary{testSummary()}); err != nil {
		t.Fatal(err)
	}
	wantCSV := "policy,trace,arrived_pct,alloc_pct,alloc_sd\np,t,0,0.000,0.000\np,t,1,50.000,0.000\np,t,2,85.000,7.070\n"
	if diff := cmp.Diff(wantCSV, csv.String()); diff != "" {
		t.Errorf("CSV (-want,+got):\n%s", diff)
	}
	if err := Plot(&img, []*Summary{testSummary()}); err != nil {
		t.Fatal(err)
	}
	decoded, err := png.Decode(&img)
	if err != nil {
		t.Fatal(err)
	}
	if b := decoded.Bounds(); b.Dx() != plotW || b.Dy() != plotH {
		t.Errorf("PNG is %v, want %dx%d", b, plotW, plotH)
	}
	if !strings.HasPrefix(csv.String(), "policy,") {
		t.Error("CSV has no header")
	}
}

func TestParseSeeds(t *testing.T) {
	tests := []struct {
		in      string
		want    []int
		wantErr bool
	}{
		{in: "42-45", want: []int{42, 43, 44, 45}},
		{in: "42, 7", want: []int{42, 7}},
		{in: "45-42", wantErr: true},
		{in: "-5", wantErr: true},
		{in: "1,-2", wantErr: true},
		{in: "x", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseSeeds(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("ParseSeeds(%q) error = %v, want error %v", tt.in, err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ParseSeeds(%q) (-want,+got):\n%s", tt.in, diff)
			}
		})
	}
}
