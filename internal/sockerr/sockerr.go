// Package sockerr recognises socket errors that are spelled differently on
// each operating system, so that the simulator says "that port is taken"
// on Linux, macOS and Windows alike.
package sockerr

// AddrInUse reports whether err says that an address (a port) is already
// taken by another listener.
func AddrInUse(err error) bool { return addrInUse(err) }
