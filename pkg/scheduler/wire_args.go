package scheduler

import (
	"bytes"
	"encoding/json"
	"unsafe"

	v1 "k8s.io/api/core/v1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
)

// extenderArgs reads the JSON of extenderv1.ExtenderArgs (same fields, same names) with one
// difference in how: the candidate names, thousands of them at scale, decode through nameList.
type extenderArgs struct {
	Pod       *v1.Pod
	Nodes     *v1.NodeList
	NodeNames *nameList
	// nameBuf, if set, is storage the names decode into (a pooled slice), not part of the JSON.
	nameBuf []string
	// intern, if set, gives the decoded names strings of their own (Cache.InternNodeNames): the
	// names are then read straight from the body, without copying it into a string first.
	intern func(names []string)
}

// names is the decoded candidate names' slice, nil if none.
func (a *extenderArgs) names() []string {
	if a.NodeNames == nil {
		return nil
	}
	return *a.NodeNames
}

// args returns the decoded request as kube-scheduler's type.
func (a *extenderArgs) args() *extenderv1.ExtenderArgs {
	return &extenderv1.ExtenderArgs{Pod: a.Pod, Nodes: a.Nodes, NodeNames: (*[]string)(a.NodeNames)}
}

// decodeFast decodes body when it has the form kube-scheduler sends: one object whose keys are
// exactly "Pod", "Nodes" and "NodeNames", each at most once, with the candidate names plain
// strings. It returns false for anything else, valid or not, and leaves a zero; the caller then
// decodes the body with encoding/json, so that the result (or the error) is always
// encoding/json's. What it gains: encoding/json scans a value twice (to check it, then to decode
// it) with a state machine per byte, and the thousands of candidate names are most of the bytes;
// here they are read once, by plainStrings, and only the pod goes through encoding/json.
func (a *extenderArgs) decodeFast(body []byte) bool {
	if !a.decodeObject(body) {
		*a = extenderArgs{nameBuf: a.nameBuf, intern: a.intern}
		return false
	}
	return true
}

// argsKeys are the keys decodeFast accepts, in the order of extenderArgs' fields.
var argsKeys = [...]string{"Pod", "Nodes", "NodeNames"}

func (a *extenderArgs) decodeObject(s []byte) bool {
	i := skipSpace(s, 0)
	if i == len(s) || s[i] != '{' {
		return false
	}
	i = skipSpace(s, i+1)
	if i < len(s) && s[i] == '}' {
		return skipSpace(s, i+1) == len(s)
	}
	seen := 0 // a bit per argsKeys index
	for {
		if i == len(s) || s[i] != '"' {
			return false
		}
		n := bytes.IndexByte(s[i+1:], '"')
		if n < 0 {
			return false
		}
		field := -1
		for k, name := range argsKeys {
			if string(s[i+1:i+1+n]) == name {
				field = k
			}
		}
		if field < 0 || seen&(1<<field) != 0 {
			return false
		}
		seen |= 1 << field
		i = skipSpace(s, i+2+n)
		if i == len(s) || s[i] != ':' {
			return false
		}
		i = skipSpace(s, i+1)
		end, ok := valueEnd(s, i)
		if !ok || !a.setField(field, s[i:end]) {
			return false
		}
		i = skipSpace(s, end)
		switch {
		case i < len(s) && s[i] == ',':
			i = skipSpace(s, i+1)
		case i < len(s) && s[i] == '}':
			return skipSpace(s, i+1) == len(s)
		default:
			return false
		}
	}
}

// setField decodes raw, the value of argsKeys[field]; false when encoding/json should say why.
func (a *extenderArgs) setField(field int, raw []byte) bool {
	switch field {
	case 0:
		return json.Unmarshal(raw, &a.Pod) == nil
	case 1:
		return json.Unmarshal(raw, &a.Nodes) == nil
	}
	if string(raw) == "null" {
		return true
	}
	names, ok := plainStrings(raw, a.nameBuf, a.intern)
	if ok {
		a.NodeNames = (*nameList)(&names)
	}
	return ok
}

// valueEnd returns the index just past the JSON value that starts at s[i], for valid JSON; it
// does not check the value (what it returns is decoded by a checking decoder), only that
// brackets and strings close.
func valueEnd(s []byte, i int) (int, bool) {
	depth := 0
	for ; i < len(s); i++ {
		switch s[i] {
		case '"':
			end, ok := stringEnd(s, i)
			if !ok || depth == 0 {
				return end, ok
			}
			i = end - 1
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 { // the end of the enclosing object or array
				return i, true
			}
			if depth--; depth == 0 {
				return i + 1, true
			}
		case ',', ' ', '\t', '\n', '\r':
			if depth == 0 {
				return i, true
			}
		}
	}
	return i, depth == 0
}

// stringEnd returns the index just past the JSON string that starts at s[i] (a quote).
func stringEnd(s []byte, i int) (int, bool) {
	for j := i + 1; j < len(s); j++ {
		switch s[j] {
		case '\\':
			j++
		case '"':
			return j + 1, true
		}
	}
	return 0, false
}

// nameList is a JSON array of strings that decodes into substrings of one copy of the array:
// one allocation for the list instead of one per name, and no reflection per element. Arrays
// with escapes, control characters or non-ASCII bytes in a string (no valid node name has
// them) decode through encoding/json, so the result is always what encoding/json gives.
type nameList []string

// UnmarshalJSON decodes b, which encoding/json has already checked to be valid JSON.
func (l *nameList) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	if names, ok := plainStrings(b, nil, nil); ok {
		*l = names
		return nil
	}
	return json.Unmarshal(b, (*[]string)(l))
}

// plainStrings decodes a JSON array of strings made of printable ASCII without escapes, into
// into's storage when it is large enough; ok is false for anything else. With intern, the
// names are first views of b, which intern replaces by strings of their own before they are
// returned (b is a pooled buffer: nothing may keep a view of it); without, they are substrings
// of one copy of b.
func plainStrings(b []byte, into []string, intern func([]string)) (names []string, ok bool) {
	var s string
	if intern != nil {
		s = unsafe.String(unsafe.SliceData(b), len(b)) //nolint:gosec // G103: views of b, replaced by intern below before they are returned
	} else {
		s = string(b)
	}
	names, ok = parseStrings(s, into)
	switch {
	case !ok:
		clear(names[:cap(names)]) // no view of b stays behind in into's storage
		return nil, false
	case intern != nil:
		intern(names)
	}
	return names, true
}

// parseStrings is plainStrings' parse: the names as substrings of s (on failure, those read so
// far, for plainStrings to clear).
func parseStrings(s string, into []string) (names []string, ok bool) {
	i := skipSpace(s, 0)
	if i == len(s) || s[i] != '[' {
		return into[:0], false
	}
	names = into[:0]
	if n := countQuotes(s) / 2; names == nil || cap(names) < n { // [] decodes to an empty list, not nil
		names = make([]string, 0, n)
	}
	i = skipSpace(s, i+1)
	if i < len(s) && s[i] == ']' {
		return names, skipSpace(s, i+1) == len(s)
	}
	for {
		if i == len(s) || s[i] != '"' {
			return names, false
		}
		j := i + 1
		for j < len(s) && s[j] != '"' {
			if c := s[j]; c < 0x20 || c == '\\' || c >= 0x80 {
				return names, false
			}
			j++
		}
		if j == len(s) {
			return names, false
		}
		names = append(names, s[i+1:j])
		i = skipSpace(s, j+1)
		switch {
		case i < len(s) && s[i] == ',':
			i = skipSpace(s, i+1)
		case i < len(s) && s[i] == ']':
			return names, skipSpace(s, i+1) == len(s)
		default:
			return names, false
		}
	}
}

// skipSpace returns the index of the first byte of s at or after i that is not JSON whitespace.
func skipSpace[T string | []byte](s T, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	return i
}

func countQuotes(s string) int {
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '"' {
			n++
		}
	}
	return n
}
