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
	"os/signal"
	"syscall"
	"time"

	"github.com/gpushare/gpushare/test/e2e/framework"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: gpushare-local up|down [flags]")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	var err error
	switch os.Args[1] {
	case "up":
		err = up(ctx, os.Args[2:])
	case "down":
		err = down(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "gpushare-local:", err)
		os.Exit(1)
	}
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[demo %s] %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

func down(args []string) error {
	fs := flag.NewFlagSet("down", flag.ExitOnError)
	dir := fs.String("dir", ".demo", "cluster folder")
	_ = fs.Parse(args)
	return framework.DownDir(context.Background(), *dir, logf)
}
