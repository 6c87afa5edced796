package scheduler

import (
	"encoding/json"
	"slices"
	"strconv"
	"unicode/utf8"

	extenderv1 "k8s.io/kube-scheduler/extender/v1"
)

// appendJSON appends the answer's JSON: what json.Marshal gives for result() (the same fields
// in the same order, strings escaped as encoding/json escapes them, HTML characters included),
// except that the failed nodes come in the request's order rather than sorted, written
// straight from the pass's verdicts. For a pod that fits none of thousands of candidates,
// building, sorting and encoding the two maps took about as long as deciding.
func (a *filterAnswer) appendJSON(b []byte) ([]byte, error) {
	b = slices.Grow(b, a.size())
	b = append(b, `{"Nodes":`...)
	if a.err != "" || a.args.NodeNames != nil {
		b = append(b, "null"...)
	} else {
		raw, err := json.Marshal(a.passedNodes())
		if err != nil {
			return nil, err
		}
		b = append(b, raw...)
	}
	b = append(b, `,"NodeNames":`...)
	if a.err != "" || a.args.NodeNames == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		first := true
		for i, n := range a.names {
			if !a.passes(i) {
				continue
			}
			if !first {
				b = append(b, ',')
			}
			first = false
			b = appendJSONString(b, n)
		}
		b = append(b, ']')
	}
	b = append(b, `,"FailedNodes":`...)
	b = a.appendFailed(b, false)
	b = append(b, `,"FailedAndUnresolvableNodes":`...)
	b = a.appendFailed(b, true)
	b = append(b, `,"Error":`...)
	b = appendJSONString(b, a.err)
	return append(b, '}'), nil
}

// size is about the length of the answer's JSON without Nodes (exact when no string needs
// escaping), so that it is written into one buffer.
func (a *filterAnswer) size() int {
	n := 128 + len(a.err)
	for i, name := range a.names {
		switch {
		case a.passes(i):
			n += len(name) + 3
		case i < len(a.failures) && a.failures[i] != nil:
			n += len(name) + len(a.failures[i].Summary) + 6
		}
	}
	return n
}

// appendFailed appends the failed candidates whose failure is unresolvable (or not) as a JSON
// object of node name to reason, in the request's order.
func (a *filterAnswer) appendFailed(b []byte, unresolvable bool) []byte {
	b = append(b, '{')
	first := true
	if a.err == "" {
		for i, fe := range a.failures {
			if fe == nil || fe.Unresolvable != unresolvable {
				continue
			}
			if !first {
				b = append(b, ',')
			}
			first = false
			b = appendJSONString(b, a.names[i])
			b = append(b, ':')
			b = appendJSONString(b, fe.Summary)
		}
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

// appendPriorities appends list's JSON, byte for byte what json.Marshal gives, without
// reflection over thousands of entries.
func appendPriorities(b []byte, list extenderv1.HostPriorityList) []byte {
	if list == nil {
		return append(b, "null"...)
	}
	b = slices.Grow(b, 2+len(list)*32)
	b = append(b, '[')
	for i := range list {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"Host":`...)
		b = appendJSONString(b, list[i].Host)
		b = append(b, `,"Score":`...)
		b = strconv.AppendInt(b, list[i].Score, 10)
		b = append(b, '}')
	}
	return append(b, ']')
}
