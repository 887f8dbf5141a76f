package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fencegate/fencegate/tests/testctl"
	"github.com/fencegate/fencegate/tests/testenv"
	"github.com/fencegate/fencegate/wire"
)

// TestGatewayUnderFaketime runs a gateway process under Debian's
// libfaketime, with its offset in a file that the test changes between
// commands (a day forward, a day back: FAKETIME_TIMESTAMP_FILE with
// FAKETIME_NO_CACHE), and the same commands on a gateway without it. The
// answers and fences must be the same.
//
// What it shows, and why the proof of clock jumps is elsewhere: the
// faketime set-up is live (date, a libc program, under the same
// environment follows every change of the file), yet the gateway's clock
// does not move (its audit trail's times stay the real ones): Go reads the
// time from the kernel's vDSO, never through libc, so libfaketime cannot
// reach it, even in a cgo-linked binary that loads it. The gateway's
// decisions under a jumping wall clock are proven on the emulated Pi,
// whose kernel clock the test sets (piemu: TestDecisionsIgnoreClockJumps).
// Should this test ever see the gateway's clock follow faketime, it says
// so: its comparison of answers then tests clock jumps too.
func TestGatewayUnderFaketime(t *testing.T) {
	testenv.Program(t, "faketime") // Debian's faketime package, which brings libfaketime
	libs, _ := filepath.Glob("/usr/lib/*/faketime/libfaketime.so.1")
	testenv.Need(t, len(libs) > 0, "libfaketime.so.1 not found under /usr/lib/*/faketime (apt-get install faketime)")
	date := testenv.Program(t, "date")
	broker := testenv.EmbeddedBroker(t)

	offsets := filepath.Join(t.TempDir(), "faketime.rc")
	setOffset := func(o string) {
		t.Helper()
		if err := os.WriteFile(offsets, []byte(o+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	setOffset("+0")
	env := []string{"LD_PRELOAD=" + libs[0], "FAKETIME_TIMESTAMP_FILE=" + offsets, "FAKETIME_NO_CACHE=1", "FAKETIME_DONT_RESET=1"}

	// The same commands on each gateway; the faked one's offset changes
	// before each command.
	script := []struct {
		offset string // in the file before the command; its time in seconds
		shift  time.Duration
		args   []string
	}{
		{"+1d", 24 * time.Hour, []string{"--actuator", "pump", "--token", "42", "--id", "k1", "on"}},
		{"-1d", -24 * time.Hour, []string{"--actuator", "pump", "--token", "42", "--id", "k1", "on"}},
		{"+1d", 24 * time.Hour, []string{"--actuator", "pump", "--token", "41", "--id", "k2", "off"}},
		{"+0", 0, []string{"--actuator", "heater", "--token", "50", "--id", "k3", "fence"}},
		{"-1d", -24 * time.Hour, []string{"--actuator", "fan", "--token", "49", "--seq", "7", "--id", "k4", "on"}},
		{"+2d", 48 * time.Hour, []string{"--actuator", "fan", "--token", "50", "--seq", "1", "--id", "k5", "on"}},
		{"-1d", -24 * time.Hour, []string{"--actuator", "pump", "--token", "42", "--seq", "1", "--id", "k6", "off"}},
	}
	idRE := regexp.MustCompile(`"id":"[^"]*"`)
	run := func(name string, faked bool) (answers []string, api string) {
		dir := t.TempDir()
		api = fmt.Sprintf("127.0.0.1:%d", testenv.Port(t))
		id := testenv.ID(t, name)
		cfg := writeConfigWith(t, dir, id, broker, api, `actuators:
  - {name: pump, pin: GPIO17}
  - {name: fan, pin: GPIO22, scope: climate}
  - {name: heater, pin: GPIO23, scope: climate, active_low: true}
`)
		ctl := testctl.Connect(t, broker, wire.Topics{GatewayID: id})
		var penv []string
		if faked {
			penv = env
		}
		p := startProc(t, penv, "run", "--config", cfg, "--init", "--log-level", "warn")
		ctl.WaitStatus(t, "online")
		waitAPI(t, api, p)
		for i, st := range script {
			if faked {
				setOffset(st.offset)
				// The set-up is live: a libc program under the same
				// environment sees the offset.
				probe := exec.Command(date, "+%s")
				probe.Env = append(os.Environ(), env...)
				out, err := probe.Output()
				sec, _ := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
				if got := time.Unix(sec, 0).Sub(time.Now()); err != nil || got < st.shift-time.Minute || got > st.shift+time.Minute {
					t.Fatalf("step %d: date under libfaketime with %s in the file is %v off the real time (%v), want %v: the faketime set-up does not work", i, st.offset, got.Round(time.Second), err, st.shift)
				}
			}
			args := append([]string{"send", "--broker", broker, "--gateway", id, "--timeout", "30s"}, st.args...)
			for j, a := range args {
				if strings.HasPrefix(a, "k") && j > 0 && args[j-1] == "--id" {
					args[j] = testenv.ID(t, name+"-"+a)
				}
			}
			out, code := runCLI(t, args...)
			answers = append(answers, fmt.Sprintf("exit %d %s", code, idRE.ReplaceAllString(strings.TrimSpace(out), `"id":"…"`)))
		}
		return answers, api
	}
	plain, _ := run("plain", false)
	wantExit := []int{0, 0, exitStale, 0, exitStale, 0, 0} // applied, duplicate, stale, fence, stale, applied, applied
	for i, a := range plain {
		if !strings.HasPrefix(a, fmt.Sprintf("exit %d ", wantExit[i])) {
			t.Fatalf("step %d without faketime: %s, want exit %d", i, a, wantExit[i])
		}
	}
	faked, api := run("faked", true)
	for i := range plain {
		if plain[i] != faked[i] {
			t.Errorf("step %d (offset %s): under faketime %q, without %q", i, script[i].offset, faked[i], plain[i])
		}
	}
	// Where the gateway's clock was while the file said a day or two off.
	moved := 0
	for _, e := range auditOf(t, api) {
		if d := e.At.Sub(time.Now()); d > time.Hour || d < -time.Hour {
			moved++
		}
	}
	if moved > 0 {
		t.Errorf("%d audit entries are more than an hour off the real time: libfaketime now reaches the gateway's clock; the comparison above tests clock jumps, and docs and piemu's README should say so", moved)
	}
	t.Logf("%d commands alike with and without libfaketime; date followed the offsets, the gateway's clock did not (Go reads the vDSO, not libc)", len(plain))
}
