package mqttlink

import (
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/fencegate/fencegate/wire"
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

// A claim is judged by the kernel's boot id and start ticks, not by the
// wall clock: a running gateway whose claim says it started a day earlier
// than the clock now computes (NTP set the clock after it started) is
// alive, not a process whose pid was reused. Before, a step of more than
// 2 s let a second gateway with the same id on this host take it for
// ended and serve too.
func TestClaimJudgedByBootAndTicks(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("processes are known on Linux only")
	}
	l := New(Options{Topics: wire.Topics{GatewayID: "aliveness"}, Store: "s"}, &countHandler{})
	me := l.claim
	if me.Boot == "" || me.Ticks == 0 {
		t.Fatalf("this process's claim has no boot id or start ticks: %+v", me)
	}
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	started, ok1 := processStart(cmd.Process.Pid)
	ticks, ok2 := processTicks(cmd.Process.Pid)
	if !ok1 || !ok2 {
		t.Fatal("no start for the child")
	}
	other := wire.Claim{Instance: "other", Store: "s2", Host: me.Host, Machine: me.Machine, PID: cmd.Process.Pid,
		Started: started.UTC().Truncate(time.Second), Boot: me.Boot, Ticks: ticks}
	for _, tc := range []struct {
		name string
		edit func(*wire.Claim)
		want liveness
	}{
		{"as it is", func(*wire.Claim) {}, alive},
		{"clock stepped a day forward since it started", func(c *wire.Claim) { c.Started = c.Started.Add(-24 * time.Hour) }, alive},
		{"clock stepped back", func(c *wire.Claim) { c.Started = c.Started.Add(time.Hour) }, alive},
		{"pid reused", func(c *wire.Claim) { c.Ticks-- }, ended},
		{"earlier boot", func(c *wire.Claim) { c.Boot = "another-boot" }, ended},
		{"same host name, another machine", func(c *wire.Claim) { c.Machine = "another-machine" }, unknown},
		{"older claim without boot, clock as it was", func(c *wire.Claim) { c.Boot, c.Ticks, c.Machine = "", 0, "" }, alive},
	} {
		if strings.Contains(tc.name, "machine") && me.Machine == "" {
			t.Logf("%s: not checked, this system has no /etc/machine-id", tc.name)
			continue
		}
		c := other
		tc.edit(&c)
		if got := l.guard.aliveness(c); got != tc.want {
			t.Errorf("%s: aliveness %d, want %d", tc.name, got, tc.want)
		}
	}
}
