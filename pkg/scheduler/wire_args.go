package scheduler

import (
	"encoding/json"

	v1 "k8s.io/api/core/v1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
)

// extenderArgs reads the JSON of extenderv1.ExtenderArgs (same fields, same names) with one
// difference in how: the candidate names, thousands of them at scale, decode through nameList.
type extenderArgs struct {
	Pod       *v1.Pod
	Nodes     *v1.NodeList
	NodeNames *nameList
}

// args returns the decoded request as kube-scheduler's type.
func (a *extenderArgs) args() *extenderv1.ExtenderArgs {
	return &extenderv1.ExtenderArgs{Pod: a.Pod, Nodes: a.Nodes, NodeNames: (*[]string)(a.NodeNames)}
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
	if names, ok := plainStrings(b); ok {
		*l = names
		return nil
	}
	return json.Unmarshal(b, (*[]string)(l))
}

// plainStrings decodes a JSON array of strings made of printable ASCII without escapes; ok is
// false for anything else.
func plainStrings(b []byte) (names []string, ok bool) {
	s := string(b)
	i := skipSpace(s, 0)
	if i == len(s) || s[i] != '[' {
		return nil, false
	}
	names = make([]string, 0, countQuotes(s)/2)
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
func skipSpace(s string, i int) int {
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
