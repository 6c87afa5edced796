package benchrun

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// Main runs run with a context that SIGINT or SIGTERM cancels; when run fails it prints
// "<name>: <error>" to stderr and exits 1.
func Main(name string, run func(ctx context.Context) error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(1)
	}
}

// Logf writes one log line of a command.
type Logf func(format string, args ...any)

// Logger returns the Logf of a command that writes "[<prefix> 15:04:05] <message>" lines to
// stderr.
func Logger(prefix string) Logf { return loggerTo(os.Stderr, prefix, time.Now) }

// loggerTo is Logger writing to w, with the time from now.
func loggerTo(w io.Writer, prefix string, now func() time.Time) Logf {
	return func(format string, args ...any) {
		_, _ = fmt.Fprintf(w, "[%s %s] %s\n", prefix, now().Format("15:04:05"), fmt.Sprintf(format, args...))
	}
}
