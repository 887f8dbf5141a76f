//go:build !linux

package testenv

import (
	"os/exec"
	"testing"
)

// Netns is a network namespace; there are none on this system.
type Netns struct {
	Name  string
	Links []*Link
}

// Link is a veth pair between namespaces.
type Link struct {
	HostIf, PeerIf     string
	HostAddr, PeerAddr string
}

// NewNetns skips t (fails it under CI): network namespaces are Linux's.
func NewNetns(t testing.TB, links int) *Netns {
	t.Helper()
	Need(t, false, "network namespaces need Linux")
	return nil
}

// Command is unused where NewNetns skips.
func (n *Netns) Command(name string, args ...string) *exec.Cmd { return nil }

// Down is unused where NewNetns skips.
func (l *Link) Down() {}

// Up is unused where NewNetns skips.
func (l *Link) Up() {}
