package inspect

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestWriteRow(t *testing.T) {
	tests := []struct {
		name  string
		cells []string
		want  string
	}{
		{name: "percent verbs are data", cells: []string{"p-100%s%d%%", "%v"}, want: "p-100%s%d%%\t%v\n"},
		{name: "tab and newline cannot add cells or rows", cells: []string{"a\tb", "c\nd"}, want: "a?b\tc?d\n"},
		{name: "terminal escape is neutralised", cells: []string{"\x1b[31mred"}, want: "?[31mred\n"},
		{name: "empty row", cells: nil, want: "\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := writeRow(&buf, tc.cells...); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, buf.String()); diff != "" {
				t.Errorf("row (-want,+got):\n%s", diff)
			}
		})
	}
}
