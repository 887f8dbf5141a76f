//go:build !failpoints

package main

import "github.com/fencegate/fencegate/fence"

// failpoint returns the crash hook of builds with the failpoints tag; in
// normal builds there is none.
func failpoint() func(fence.Command) { return nil }
