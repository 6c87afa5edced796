package main

import (
	"fmt"
	"strconv"
	"strings"
)

// xidList is a flag.Value of XID codes written as a comma-separated list ("13,31,43");
// empty is no codes.
type xidList struct{ p *[]uint64 }

func (x xidList) String() string {
	if x.p == nil {
		return ""
	}
	parts := make([]string, len(*x.p))
	for i, v := range *x.p {
		parts[i] = strconv.FormatUint(v, 10)
	}
	return strings.Join(parts, ",")
}

func (x xidList) Set(s string) error {
	var out []uint64
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		v, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return fmt.Errorf("XID %q: want a whole number: %w", f, err)
		}
		out = append(out, v)
	}
	*x.p = out
	return nil
}
