package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"

	v1 "k8s.io/api/core/v1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
)

// DecodeArgs decodes body, a filter or prioritize request, as encoding/json decodes it into
// kube-scheduler's type (value and error alike), with nothing but white space after the JSON
// value. The result keeps no reference to body.
//
// The form kube-scheduler sends (one object with the keys Pod, Nodes and NodeNames, each at
// most once, the names plain strings) is decoded by hand: encoding/json scans a value twice
// with a state machine per byte, and the thousands of candidate names are most of the bytes;
// here they are read once, and only the pod goes through encoding/json. Any other body,
// valid or not, goes through encoding/json, which also words the error.
func DecodeArgs(body []byte) (*extenderv1.ExtenderArgs, error) {
	if args, ok := decodeArgsFast(body); ok {
		return args, nil
	}
	var args extenderArgs
	if err := Decode(body, &args); err != nil {
		return nil, err
	}
	return &extenderv1.ExtenderArgs{Pod: args.Pod, Nodes: args.Nodes, NodeNames: args.NodeNames}, nil
}

// extenderArgs is extenderv1.ExtenderArgs under the name encoding/json's errors have always
// given it here ("Go struct field extenderArgs.Pod of type v1.Pod").
type extenderArgs struct {
	Pod       *v1.Pod
	Nodes     *v1.NodeList
	NodeNames *[]string
}

// Decode decodes body, one JSON value with nothing but white space after it, into v (the
// bind and preempt requests, and any other JSON the extender reads).
func Decode(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) { // dec.More is false before ']' and '}'
		return errors.New("unexpected data after the JSON value")
	}
	return nil
}

// argsKeys are the keys decodeArgsFast accepts, extenderArgs' fields.
var argsKeys = [...]string{"Pod", "Nodes", "NodeNames"}

// decodeArgsFast decodes the form kube-scheduler sends; ok is false for anything else.
func decodeArgsFast(s []byte) (args *extenderv1.ExtenderArgs, ok bool) {
	args = &extenderv1.ExtenderArgs{}
	i := skipSpace(s, 0)
	if i == len(s) || s[i] != '{' {
		return nil, false
	}
	i = skipSpace(s, i+1)
	if i < len(s) && s[i] == '}' {
		return args, skipSpace(s, i+1) == len(s)
	}
	seen := 0 // a bit per argsKeys index
	for {
		field, next, ok := readKey(s, i)
		if !ok || seen&(1<<field) != 0 {
			return nil, false
		}
		seen |= 1 << field
		end, ok := valueEnd(s, next)
		if !ok || !setField(args, field, s[next:end]) {
			return nil, false
		}
		i = skipSpace(s, end)
		switch {
		case i < len(s) && s[i] == ',':
			i = skipSpace(s, i+1)
		case i < len(s) && s[i] == '}':
			return args, skipSpace(s, i+1) == len(s)
		default:
			return nil, false
		}
	}
}

// readKey reads the key at s[i] and its colon: the key's argsKeys index and where its value
// starts; ok is false for any other key.
func readKey(s []byte, i int) (field, next int, ok bool) {
	if i == len(s) || s[i] != '"' {
		return 0, 0, false
	}
	n := bytes.IndexByte(s[i+1:], '"')
	if n < 0 {
		return 0, 0, false
	}
	field = -1
	for k, name := range argsKeys {
		if string(s[i+1:i+1+n]) == name {
			field = k
		}
	}
	i = skipSpace(s, i+2+n)
	if field < 0 || i == len(s) || s[i] != ':' {
		return 0, 0, false
	}
	return field, skipSpace(s, i+1), true
}

// setField decodes raw, the value of argsKeys[field]; false when encoding/json should say why.
func setField(args *extenderv1.ExtenderArgs, field int, raw []byte) bool {
	switch field {
	case 0:
		var pod *v1.Pod
		if json.Unmarshal(raw, &pod) != nil {
			return false
		}
		args.Pod = pod
		return true
	case 1:
		var nodes *v1.NodeList
		if json.Unmarshal(raw, &nodes) != nil {
			return false
		}
		args.Nodes = nodes
		return true
	}
	if string(raw) == "null" {
		return true
	}
	names, ok := plainStrings(raw)
	if ok {
		args.NodeNames = &names
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

// plainStrings decodes a JSON array of strings made of printable ASCII without escapes (no
// valid node name has escapes, control characters or non-ASCII bytes) into substrings of
// one copy of b: one allocation for the list's text instead of one per name, and no
// reflection per element. ok is false for anything else.
func plainStrings(b []byte) (names []string, ok bool) {
	s := string(b)
	i := skipSpace(s, 0)
	if i == len(s) || s[i] != '[' {
		return nil, false
	}
	names = make([]string, 0, strings.Count(s, `"`)/2) // [] decodes to an empty list, not nil
	i = skipSpace(s, i+1)
	if i < len(s) && s[i] == ']' {
		return names, skipSpace(s, i+1) == len(s)
	}
	for {
		if i == len(s) || s[i] != '"' {
			return nil, false
		}
		j := i + 1
		for j < len(s) && s[j] != '"' {
			if c := s[j]; c < 0x20 || c == '\\' || c >= 0x80 {
				return nil, false
			}
			j++
		}
		if j == len(s) {
			return nil, false
		}
		names = append(names, s[i+1:j])
		i = skipSpace(s, j+1)
		switch {
		case i < len(s) && s[i] == ',':
			i = skipSpace(s, i+1)
		case i < len(s) && s[i] == ']':
			return names, skipSpace(s, i+1) == len(s)
		default:
			return nil, false
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
