//go:build failpoints

package main

import (
	"fmt"
	"os"
	"runtime/pprof"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/fencegate/fencegate/fence"
)

// failpointsBuild reports whether this is a build with the failpoints tag.
const failpointsBuild = true

// envCommitDelay names the environment variable with which a failpoints
// build slows every commit of its store (gateway bench --profile sdcard).
const envCommitDelay = "FENCEGATE_COMMIT_DELAY"

// failpoint, in builds with the failpoints tag (crash tests only), kills the
// process with SIGKILL after the Nth durable commit and before its drive,
// where N is FENCEGATE_CRASH_AFTER_COMMIT. This is the window between the
// fsync and the output that reconciliation at the next start must close.
//
// FENCEGATE_HANG_AFTER_COMMIT=N instead makes the Nth applied command
// hang there for ever, holding its scope's lock: a decision path stuck as
// by a drive that never returns (the watchdog test).
func failpoint() func(fence.Command) {
	at := func(name string) int64 {
		n, err := strconv.ParseInt(os.Getenv(name), 10, 64)
		if err != nil || n <= 0 {
			return 0
		}
		return n
	}
	crash, hang := at("FENCEGATE_CRASH_AFTER_COMMIT"), at("FENCEGATE_HANG_AFTER_COMMIT")
	if crash == 0 && hang == 0 {
		return nil
	}
	var count atomic.Int64
	return func(fence.Command) {
		switch count.Add(1) {
		case crash:
			killSelf() // never drives
		case hang:
			select {} // never drives, never lets the scope go
		}
	}
}

// commitDelay, in builds with the failpoints tag (benchmarks only), is
// FENCEGATE_COMMIT_DELAY (e.g. 15ms): every commit of the store then takes
// that much longer after its sync, as on an SD card. Unset means none.
func commitDelay() (time.Duration, error) {
	v, ok := os.LookupEnv(envCommitDelay)
	if !ok || v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 || d > time.Second {
		return 0, fmt.Errorf("%s=%q: want a duration from 0 to 1s, e.g. 15ms (or unset it)", envCommitDelay, v)
	}
	return d, nil
}

// startProfiles, in builds with the failpoints tag (benchmarks only), writes a
// CPU profile of the whole run to the file FENCEGATE_CPUPROFILE names, and
// at the end of the run the allocations (heap profile) to the file
// FENCEGATE_MEMPROFILE names; the returned function ends them.
func startProfiles() (stop func(), err error) {
	var cpu, mem *os.File
	closeAll := func() {
		for _, f := range []*os.File{cpu, mem} {
			if f != nil {
				f.Close()
			}
		}
	}
	if path := os.Getenv("FENCEGATE_MEMPROFILE"); path != "" {
		if mem, err = os.Create(path); err != nil {
			return nil, fmt.Errorf("FENCEGATE_MEMPROFILE: %w", err)
		}
	}
	if path := os.Getenv("FENCEGATE_CPUPROFILE"); path != "" {
		if cpu, err = os.Create(path); err != nil {
			closeAll()
			return nil, fmt.Errorf("FENCEGATE_CPUPROFILE: %w", err)
		}
		if err := pprof.StartCPUProfile(cpu); err != nil {
			closeAll()
			return nil, fmt.Errorf("FENCEGATE_CPUPROFILE: %w", err)
		}
	}
	return func() {
		if cpu != nil {
			pprof.StopCPUProfile()
		}
		if mem != nil {
			if err := pprof.Lookup("allocs").WriteTo(mem, 0); err != nil {
				fmt.Fprintf(os.Stderr, "FENCEGATE_MEMPROFILE: %v\n", err)
			}
		}
		closeAll()
	}, nil
}
