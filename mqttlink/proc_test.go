package mqttlink

import (
	"os"
	"os/exec"
	"runtime"
	"testing"
	"time"
)

// processStart finds this process and a child, at the times they started,
// and no process for a pid that is gone.
func TestProcessStart(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("processes are known on Linux only")
	}
	self, ok := processStart(os.Getpid())
	if !ok || time.Since(self) < 0 || time.Since(self) > 10*time.Minute {
		t.Fatalf("processStart(self) = %v, %v", self, ok)
	}
	before := time.Now()
	cmd := exec.Command("sleep", "5")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	child, ok := processStart(cmd.Process.Pid)
	if !ok || child.Before(before.Add(-time.Second)) || child.After(time.Now().Add(time.Second)) {
		t.Errorf("processStart(child) = %v, %v; want about %v", child, ok, before)
	}
	cmd.Process.Kill()
	cmd.Wait()
	if _, ok := processStart(cmd.Process.Pid); ok {
		t.Error("processStart of an ended process found it")
	}
}
