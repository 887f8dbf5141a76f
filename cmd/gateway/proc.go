package main

import "os"

// killSelf ends this process at once, as a crash would: SIGKILL on Unix,
// TerminateProcess on Windows. Nothing after it runs.
func killSelf() {
	if p, err := os.FindProcess(os.Getpid()); err == nil {
		p.Kill()
	}
	select {}
}
