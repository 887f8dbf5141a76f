//go:build !windows

package main

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// pauseSelf stops this process (SIGSTOP), as a garbage-collection stop or
// a frozen VM would, and returns once it was continued (SIGCONT). The stop
// is certain before it returns: a self-sent SIGSTOP may be taken by
// another thread a moment later, so it waits for the SIGCONT that can only
// come after the stop.
func pauseSelf(stderr io.Writer) error {
	cont := make(chan os.Signal, 1)
	signal.Notify(cont, syscall.SIGCONT)
	defer signal.Stop(cont)
	pid := os.Getpid()
	fmt.Fprintf(stderr, "stopping (pid %d); continue with: kill -CONT %d\n", pid, pid)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		return fmt.Errorf("stop: %w", err)
	}
	<-cont
	return nil
}
