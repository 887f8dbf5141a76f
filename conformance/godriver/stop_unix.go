//go:build unix

package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// pauseSelf stops this process until a SIGCONT, as a GC stop or a
// suspended machine would stop a controller.
func pauseSelf() error {
	cont := make(chan os.Signal, 1)
	signal.Notify(cont, syscall.SIGCONT)
	defer signal.Stop(cont)
	if err := syscall.Kill(os.Getpid(), syscall.SIGSTOP); err != nil {
		return fmt.Errorf("stop: %w", err)
	}
	<-cont
	return nil
}
