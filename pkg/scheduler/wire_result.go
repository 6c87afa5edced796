package scheduler

import (
	"encoding/json"
	"slices"
	"unicode/utf8"

	extenderv1 "k8s.io/kube-scheduler/extender/v1"
)

// appendFilterResult appends the JSON of res: byte for byte what json.Marshal gives (fields in
// order, map keys sorted, strings escaped as encoding/json escapes them, HTML characters
// included), without reflection over the two maps of failed nodes. For a pod that fits none of
// thousands of candidates, encoding them reflectively took about as long as deciding.
func appendFilterResult(b []byte, res *extenderv1.ExtenderFilterResult) ([]byte, error) {
	b = slices.Grow(b, filterResultSize(res))
	b = append(b, `{"Nodes":`...)
	if res.Nodes == nil {
		b = append(b, "null"...)
	} else {
		raw, err := json.Marshal(res.Nodes)
		if err != nil {
			return nil, err
		}
		b = append(b, raw...)
	}
	b = append(b, `,"NodeNames":`...)
	if res.NodeNames == nil || *res.NodeNames == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i, n := range *res.NodeNames {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, n)
		}
		b = append(b, ']')
	}
	b = append(b, `,"FailedNodes":`...)
	b = appendFailedNodes(b, res.FailedNodes)
	b = append(b, `,"FailedAndUnresolvableNodes":`...)
	b = appendFailedNodes(b, res.FailedAndUnresolvableNodes)
	b = append(b, `,"Error":`...)
	b = appendJSONString(b, res.Error)
	return append(b, '}'), nil
}

// filterResultSize is about the length of res's JSON without Nodes (exact when no string
// needs escaping), so that the answer is written into one buffer.
func filterResultSize(res *extenderv1.ExtenderFilterResult) int {
	n := 128 + len(res.Error)
	if res.NodeNames != nil {
		for _, name := range *res.NodeNames {
			n += len(name) + 3
		}
	}
	for _, m := range []extenderv1.FailedNodesMap{res.FailedNodes, res.FailedAndUnresolvableNodes} {
		for k, v := range m {
			n += len(k) + len(v) + 6
		}
	}
	return n
}

// appendFailedNodes appends m as a JSON object with sorted keys (null for a nil map).
func appendFailedNodes(b []byte, m extenderv1.FailedNodesMap) []byte {
	if m == nil {
		return append(b, "null"...)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, k)
		b = append(b, ':')
		b = appendJSONString(b, m[k])
	}
	return append(b, '}')
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string the way encoding/json writes it with HTML
// escaping: quotes and backslashes escaped, control characters as \b \f \n \r \t or \u00XX,
// <, > and & as \u003c \u003e \u0026, invalid UTF-8 as \ufffd, U+2028 and U+2029 escaped.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
