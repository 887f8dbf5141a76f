//go:build !failpoints

package main

import (
	"time"

	"github.com/fencegate/fencegate/fence"
)

// failpointsBuild reports whether this is a build with the failpoints tag.
const failpointsBuild = false

// failpoint returns the crash hook of builds with the failpoints tag; in
// normal builds there is none.
func failpoint() func(fence.Command) { return nil }

// commitDelay returns the slowed store commit of builds with the
// failpoints tag; normal builds never slow their store, whatever the
// environment says.
func commitDelay() (time.Duration, error) { return 0, nil }

// startProfiles profiles nothing outside builds with the failpoints tag.
func startProfiles() (stop func(), err error) { return func() {}, nil }
