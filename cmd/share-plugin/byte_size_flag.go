package main

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/resource"
)

// byteSize is a flag.Value of a size in bytes, written as a quantity: "4Mi", "8388608", "0".
type byteSize struct{ p *int64 }

func (b byteSize) String() string {
	if b.p == nil {
		return "0"
	}
	return resource.NewQuantity(*b.p, resource.BinarySI).String()
}

func (b byteSize) Set(s string) error {
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return fmt.Errorf("size %q: %w", s, err)
	}
	v, ok := q.AsInt64()
	if !ok || v < 0 {
		return fmt.Errorf("size %q: want a whole number of bytes >= 0, such as 4Mi", s)
	}
	*b.p = v
	return nil
}
