//go:build !nosim

package main

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// invokedAs is how the user started this program, for the commands the
// simulator suggests: as typed (gateway, bin/gateway, /usr/bin/gateway),
// or go run ./cmd/gateway when go run built it into a temporary directory
// that is gone once it stops.
func invokedAs() string {
	arg0 := os.Args[0]
	if strings.Contains(filepath.ToSlash(arg0), "/go-build") && strings.HasPrefix(arg0, os.TempDir()) {
		return "go run ./cmd/gateway"
	}
	return arg0
}

// freeNear returns the first host:port after addr's port, on its host, that
// can be listened on now; "" if none of the next hundred can. A hint that
// names a port in use sends the user round in a circle.
func freeNear(addr string) string {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return ""
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		return ""
	}
	for q := port + 1; q <= port+100 && q < 65536; q++ {
		a := net.JoinHostPort(host, strconv.Itoa(q))
		if ln, err := net.Listen("tcp", a); err == nil {
			ln.Close()
			return a
		}
	}
	return ""
}

// startWith is the hint for an address in use: another free one for flag,
// or port 0, which the kernel picks (the ready message says which).
func startWith(flag, addr string) string {
	if free := freeNear(addr); free != "" {
		return "start with " + flag + " " + free
	}
	host, _, _ := net.SplitHostPort(addr)
	return "start with " + flag + " " + net.JoinHostPort(host, "0") + " (a port the kernel picks)"
}
