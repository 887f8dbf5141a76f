//go:build windows

package sockerr

import (
	"errors"
	"syscall"
)

// wsaeaddrinuse is Winsock's WSAEADDRINUSE: Go's net package reports it
// as this Errno, not as syscall.EADDRINUSE.
const wsaeaddrinuse = syscall.Errno(10048)

func addrInUse(err error) bool {
	return errors.Is(err, wsaeaddrinuse) || errors.Is(err, syscall.EADDRINUSE)
}
