// Command gpushare-local starts and stops the demo cluster of `make demo`: etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler with the project's extender config,
// the extender and kwok-managed fake GPU nodes (plus, with --share-plugin, a real kubelet node
// "localhost" with containerd and share-plugin on mocked GPUs), all on 127.0.0.1 and all left running with
// their PIDs recorded in the cluster folder; `down` stops them by PID.
//
//	gpushare-local up   --dir .demo --bin bin/e2e/v1.37.1 --extender .demo/bin/extender
//	gpushare-local down --dir .demo
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/gpushare/gpushare/test/e2e/cmd/internal/benchrun"
	"github.com/gpushare/gpushare/test/e2e/framework"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: gpushare-local up|down [flags]")
		os.Exit(2)
	}
	benchrun.Main("gpushare-local", func(ctx context.Context) error {
		switch os.Args[1] {
		case "up":
			return up(ctx, os.Args[2:])
		case "down":
			return down(os.Args[2:])
		default:
			return fmt.Errorf("unknown command %q", os.Args[1])
		}
	})
}

// logf writes one log line of the command.
func logf(format string, args ...any) { benchrun.Logger("demo")(format, args...) }

func down(args []string) error {
	fs := flag.NewFlagSet("down", flag.ExitOnError)
	dir := fs.String("dir", ".demo", "cluster folder")
	_ = fs.Parse(args)
	return framework.DownDir(context.Background(), *dir, logf)
}
