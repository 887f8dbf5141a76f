package main

import (
	"fmt"
	"os"
)

// killSelf ends this process at once, as a crash would: SIGKILL on Unix,
// TerminateProcess on Windows. Nothing after it runs.
func killSelf() {
	if p, err := os.FindProcess(os.Getpid()); err == nil {
		p.Kill()
	}
	select {}
}

// gatewayCommand is how the simulator and the bench start the gateway:
// this binary.
func gatewayCommand() ([]string, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("cannot find this program to run the gateway: %w", err)
	}
	return []string{exe}, nil
}
