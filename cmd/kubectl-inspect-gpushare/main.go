// Command kubectl-inspect-gpushare is `kubectl inspect gpushare`: it shows how much GPU memory
// pods hold on each card of each GPU-sharing node. kubectl finds it on PATH; it also runs on its
// own. The logic lives in pkg/inspect.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/gpushare/gpushare/pkg/inspect"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	cmd := inspect.NewCmd(genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr})
	err := cmd.ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}
