package main

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// linePrefix starts every machine-readable line a workload prints: "GPUCHECK key=value".
const linePrefix = "GPUCHECK "

// Keys of the workload's lines (workload.py and alloc.cu print the same ones).
const (
	keyRuntime       = "runtime"           // torch-<version> or cuda-c
	keyCUDARuntime   = "cuda_runtime"      // the CUDA runtime version the workload uses
	keyTotal         = "total_bytes"       // total of cudaMemGetInfo / torch.cuda.mem_get_info
	keyFree          = "free_bytes"        // free of the same call, right after CUDA started
	keyPropsTotal    = "props_total_bytes" // the device properties' total memory
	keyWithin        = "alloc_within"      // ok, oom or error
	keyWithinBytes   = "alloc_within_bytes"
	keyWithinError   = "alloc_within_error"
	keyHolding       = "holding" // the within allocation is held; waiting for "go" on stdin
	keyPast          = "alloc_past"
	keyPastBytes     = "alloc_past_bytes"
	keyPastError     = "alloc_past_error"
	keyNVMLTotalMiB  = "nvml_total_mib" // what NVML inside reports as the card's total
	keyNVMLError     = "nvml_error"
	keyMaxAlloc      = "max_alloc_bytes" // the largest allocation that succeeded (maxalloc mode)
	keyMaxAllocError = "max_alloc_error"
	keyReady         = "ready" // everything measured; waiting for stdin to close
	keyFatal         = "fatal" // the workload could not go on
	resultOK         = "ok"
	resultOOM        = "oom"
	resultError      = "error"
	workloadGoSignal = "go\n"
)

// workloadReport is what one workload printed, by key; the last value of a key wins.
type workloadReport map[string]string

// parseLine reads one workload line; ok is false for lines that are not GPUCHECK lines or
// have no key.
func parseLine(line string) (key, value string, ok bool) {
	rest, found := strings.CutPrefix(strings.TrimRight(line, "\r\n"), linePrefix)
	if !found {
		return "", "", false
	}
	key, value, _ = strings.Cut(strings.TrimSpace(rest), "=")
	if key == "" || strings.ContainsAny(key, " \t") {
		return "", "", false
	}
	return key, value, true
}

// parseReport reads every GPUCHECK line of r and ignores the rest.
func parseReport(r io.Reader) (workloadReport, error) {
	out := workloadReport{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if k, v, ok := parseLine(sc.Text()); ok {
			out[k] = v
		}
	}
	if err := sc.Err(); err != nil {
		return out, fmt.Errorf("read workload output: %w", err)
	}
	return out, nil
}

// bytes reads key as a byte count; ok is false when it is missing or not a number.
func (r workloadReport) bytes(key string) (int64, bool) {
	v, err := strconv.ParseInt(r[key], 10, 64)
	return v, err == nil
}

// check is one row of the result table.
type check struct {
	Name, Expected, Observed string
	Pass                     bool
}

// measure is one row of the measurements table: a figure users budget for, not a verdict.
type measure struct {
	Name, Value string
}

// results is the table of a run, in the order the checks ran, and the figures it measured.
type results struct {
	checks   []check
	measures []measure
}

// measured appends a measurement.
func (r *results) measured(name, value string) {
	r.measures = append(r.measures, measure{Name: name, Value: value})
}

// writeMeasures renders the measurements as a Markdown table; nothing when there are none.
func (r *results) writeMeasures(w io.Writer) error {
	if len(r.measures) == 0 {
		return nil
	}
	var b strings.Builder
	b.WriteString("| measurement | value |\n|---|---|\n")
	for _, m := range r.measures {
		fmt.Fprintf(&b, "| %s | %s |\n", cell(m.Name), cell(m.Value))
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("write measurements: %w", err)
	}
	return nil
}

// add appends a row.
func (r *results) add(name, expected, observed string, pass bool) {
	r.checks = append(r.checks, check{Name: name, Expected: expected, Observed: observed, Pass: pass})
}

// counts returns how many checks passed and failed.
func (r *results) counts() (passed, failed int) {
	for _, c := range r.checks {
		if c.Pass {
			passed++
		} else {
			failed++
		}
	}
	return passed, failed
}

// writeTable renders the checks as a Markdown table.
func (r *results) writeTable(w io.Writer) error {
	var b strings.Builder
	b.WriteString("| check | expected | observed | result |\n|---|---|---|---|\n")
	for _, c := range r.checks {
		verdict := "FAIL"
		if c.Pass {
			verdict = "PASS"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", cell(c.Name), cell(c.Expected), cell(c.Observed), verdict)
	}
	_, err := io.WriteString(w, b.String())
	if err != nil {
		return fmt.Errorf("write table: %w", err)
	}
	return nil
}

// summary is the run's last line.
func (r *results) summary() string {
	passed, failed := r.counts()
	return fmt.Sprintf("gpu-check: %d passed, %d failed", passed, failed)
}

// cell makes s safe inside a Markdown table cell: one line, pipes escaped, never empty.
func cell(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if s == "" {
		return "-"
	}
	return strings.ReplaceAll(s, "|", `\|`)
}

// mib renders a byte count in MiB.
func mib(b int64) string { return fmt.Sprintf("%d MiB", b>>20) }
