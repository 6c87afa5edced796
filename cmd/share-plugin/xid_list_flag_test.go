package main

import (
	"flag"
	"io"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpushare/gpushare/pkg/deviceplugin"
)

func TestXIDList(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    []uint64
		wantErr bool
	}{
		{name: "default: NVIDIA's device plugin's list", want: deviceplugin.DefaultIgnoredXIDs()},
		{name: "one more", args: []string{"--health-ignored-xids=13,31,43,45,68,109,94"}, want: []uint64{13, 31, 43, 45, 68, 109, 94}},
		{name: "spaces", args: []string{"--health-ignored-xids= 13 , 109 "}, want: []uint64{13, 109}},
		{name: "none ignored", args: []string{"--health-ignored-xids="}, want: nil},
		{name: "not a number", args: []string{"--health-ignored-xids=13,all"}, wantErr: true},
		{name: "negative", args: []string{"--health-ignored-xids=-1"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := newOptions()
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			o.addFlags(fs)
			err := fs.Parse(tt.args)
			if (err != nil) != tt.wantErr {
				t.Fatalf("Parse(%q) = %v, want error %t", tt.args, err, tt.wantErr)
			}
			if tt.wantErr {
				return
			}
			if diff := cmp.Diff(tt.want, o.ignoredXIDs); diff != "" {
				t.Errorf("ignored XIDs (-want,+got):\n%s", diff)
			}
			if got, want := fs.Lookup("health-ignored-xids").DefValue, "13,31,43,45,68,109"; got != want {
				t.Errorf("default shown as %q, want %q", got, want)
			}
		})
	}
}
