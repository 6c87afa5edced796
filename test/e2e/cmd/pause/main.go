// Command pause is the sandbox process of the real-kubelet test's local image: it sleeps until
// SIGTERM or SIGINT (PID 1 in a container ignores signals it does not handle).
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGTERM, syscall.SIGINT)
	<-c
}
