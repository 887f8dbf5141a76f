//go:build linux

package mqttlink

import (
	"bufio"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// processStart returns when process pid started, from /proc: the boot
// time plus the process's start in clock ticks (USER_HZ, 100 on every
// Linux ABI). ok is false if there is no such process. The time moves with
// the wall clock (the kernel's boot time does): for people, not for
// telling processes apart (see processTicks).
func processStart(pid int) (time.Time, bool) {
	ticks, ok := processTicks(pid)
	if !ok {
		return time.Time{}, false
	}
	boot, ok := bootTime()
	if !ok {
		return time.Time{}, false
	}
	return boot.Add(time.Duration(ticks) * 10 * time.Millisecond), true
}

// processTicks returns when process pid started, in clock ticks since the
// boot: a number no clock step changes. ok is false if there is no such
// process, or it has ended: a zombie (state Z), which waits for its parent
// to reap it (for good, under a parent that never does, as in a container
// without an init), or one being reaped (X).
func processTicks(pid int) (int64, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(s[i+1:]) // from field 3 (state) on
	if len(f) < 20 || f[0] == "Z" || f[0] == "X" || f[0] == "x" {
		return 0, false
	}
	ticks, err := strconv.ParseInt(f[19], 10, 64) // field 22, starttime
	if err != nil {
		return 0, false
	}
	return ticks, true
}

// machineID returns an id of this machine's installation, derived from
// /etc/machine-id (systemd's, which must not be shown as it is: it is
// hashed with this program's own key, as systemd recommends), "" if
// unknown. Two Raspberry Pis keep their default host name, raspberrypi,
// but not their machine ids.
func machineID() string {
	b, err := os.ReadFile("/etc/machine-id")
	if err != nil {
		return ""
	}
	id := strings.TrimSpace(string(b))
	if id == "" {
		return ""
	}
	m := hmac.New(sha256.New, []byte("fencegate instance claim v1"))
	m.Write([]byte(id))
	return hex.EncodeToString(m.Sum(nil)[:16])
}

// bootID returns the kernel's random id of this boot, "" if unknown.
func bootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func bootTime() (time.Time, bool) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return time.Time{}, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "btime "); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return time.Time{}, false
			}
			return time.Unix(n, 0), true
		}
	}
	return time.Time{}, false
}

// processesKnown says whether processStart can tell.
const processesKnown = true
