package main

import (
	"flag"
	"io"
	"strings"
	"testing"

	"github.com/gpushare/gpushare/pkg/deviceplugin"
)

func TestCounterSizeFlag(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		want     int64
		parseErr bool
		wantErr  string // from validate
	}{
		{name: "default", args: []string{"--memory-limit=hami-core"}, want: deviceplugin.DefaultCounterSize},
		{name: "binary suffix", args: []string{"--memory-limit=hami-core", "--hami-core-counter-size=8Mi"}, want: 8 << 20},
		{name: "bytes", args: []string{"--memory-limit=hami-core", "--hami-core-counter-size=3145728"}, want: 3 << 20},
		{name: "0 turns the tmpfs off", args: []string{"--memory-limit=hami-core", "--hami-core-counter-size=0"}, want: 0},
		{name: "smaller than HAMi-core's file", args: []string{"--memory-limit=hami-core", "--hami-core-counter-size=64Ki"}, want: 64 << 10, wantErr: "counter size"},
		{name: "negative", args: []string{"--hami-core-counter-size=-1Mi"}, parseErr: true},
		{name: "fraction of a byte", args: []string{"--hami-core-counter-size=0.5"}, parseErr: true},
		{name: "not a quantity", args: []string{"--hami-core-counter-size=lots"}, parseErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("NODE_NAME", "n1")
			o := newOptions()
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			o.addFlags(fs)
			err := fs.Parse(tt.args)
			if tt.parseErr {
				if err == nil {
					t.Fatalf("Parse(%q) = nil, want an error", tt.args)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if o.memoryLimit.CounterSize != tt.want {
				t.Errorf("CounterSize = %d, want %d", o.memoryLimit.CounterSize, tt.want)
			}
			err = o.validate()
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("validate() = %v, want error containing %q", err, tt.wantErr)
			}
		})
	}
	// the help shows the default as people write it
	var help strings.Builder
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(&help)
	newOptions().addFlags(fs)
	fs.PrintDefaults()
	if !strings.Contains(help.String(), "(default 4Mi)") {
		t.Errorf("help does not show the default 4Mi:\n%s", help.String())
	}
}
