package testenv

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Netns is a network namespace a test made for itself, with veth links to
// the test's own namespace: a host of its own on this machine, whose links
// the test can cut and restore, to partition a process that runs there
// (see Command) from one service while it keeps another.
//
// Each Netns takes a /24 of 10.213.0.0/16 that no other test on this
// machine has (a lock in PortDir, as Port's), so two suites never share an
// address; the addresses exist only on these links, between this machine's
// namespaces, and nothing routes them anywhere else.
type Netns struct {
	Name  string
	Links []*Link
	t     testing.TB
}

// Link is a veth pair between the test's namespace (Host*) and a Netns
// (Peer*), each end with an address of a /30.
type Link struct {
	HostIf, PeerIf     string // interface names
	HostAddr, PeerAddr string // IPv4 addresses
	ns                 *Netns
}

// NewNetns makes a network namespace with links veth links (loopback up in
// it too) and removes it when t ends. It needs root and iproute2's ip: it
// skips without them, or if the kernel refuses a namespace or a veth (in
// an unprivileged container), with the reason; under CI it fails.
func NewNetns(t testing.TB, links int) *Netns {
	t.Helper()
	Need(t, os.Geteuid() == 0, "network namespaces and veth links need root")
	ip := Program(t, "ip")
	if err := os.MkdirAll(PortDir, 0o777); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	net, unlock := -1, func() {}
	start := rand.IntN(256)
	for i := range 256 {
		n := (start + i) % 256
		u, ok, err := lockPort(filepath.Join(PortDir, fmt.Sprintf("net-10.213.%d.lock", n)))
		if err == nil && ok {
			net, unlock = n, u
			break
		}
	}
	if net < 0 {
		t.Fatalf("testenv: no free /24 in 10.213.0.0/16 for a test network namespace (all 256 locked in %s)", PortDir)
	}
	t.Cleanup(unlock)
	ns := &Netns{Name: fmt.Sprintf("fencegate-%d", net), t: t}
	run := func(args ...string) error {
		if out, err := exec.Command(ip, args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
		}
		return nil
	}
	// What a test that died left behind under this lock's names.
	for i := range links {
		run("link", "del", fmt.Sprintf("fg%dh%d", net, i))
	}
	run("netns", "del", ns.Name)
	if err := run("netns", "add", ns.Name); err != nil {
		Need(t, false, "cannot make a network namespace: %v", err)
	}
	t.Cleanup(func() {
		for _, l := range ns.Links {
			run("link", "del", l.HostIf)
		}
		run("netns", "del", ns.Name)
	})
	if err := run("-n", ns.Name, "link", "set", "lo", "up"); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	for i := range links {
		l := &Link{HostIf: fmt.Sprintf("fg%dh%d", net, i), PeerIf: fmt.Sprintf("fg%da%d", net, i),
			HostAddr: fmt.Sprintf("10.213.%d.%d", net, 4*i+1), PeerAddr: fmt.Sprintf("10.213.%d.%d", net, 4*i+2), ns: ns}
		if err := run("link", "add", l.HostIf, "type", "veth", "peer", "name", l.PeerIf); err != nil {
			Need(t, false, "cannot make a veth pair: %v", err)
		}
		ns.Links = append(ns.Links, l)
		for _, args := range [][]string{
			{"link", "set", l.PeerIf, "netns", ns.Name},
			{"addr", "add", l.HostAddr + "/30", "dev", l.HostIf},
			{"link", "set", l.HostIf, "up"},
			{"-n", ns.Name, "addr", "add", l.PeerAddr + "/30", "dev", l.PeerIf},
			{"-n", ns.Name, "link", "set", l.PeerIf, "up"},
		} {
			if err := run(args...); err != nil {
				t.Fatalf("testenv: %v", err)
			}
		}
	}
	return ns
}

// Command returns a command that runs name with args in the namespace.
func (n *Netns) Command(name string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", n.Name, name}, args...)...)
}

// Down cuts the link: the host's end goes down, and with it the carrier of
// the other end. Established connections over it see nothing but silence,
// as in a partition: no reset, no error until their own timeouts.
func (l *Link) Down() { l.set("down") }

// Up restores the link.
func (l *Link) Up() { l.set("up") }

func (l *Link) set(state string) {
	l.ns.t.Helper()
	if out, err := exec.Command("ip", "link", "set", l.HostIf, state).CombinedOutput(); err != nil {
		l.ns.t.Fatalf("testenv: ip link set %s %s: %v: %s", l.HostIf, state, err, out)
	}
}
