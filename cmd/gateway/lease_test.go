package main

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencegate/fencegate/client"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/tests/testenv"
)

// TestSendLocksTheScope: gateway send --etcd locks the
// actuator's fence scope, as the gateway publishes it, never the
// actuator's name: a controller holding the climate lease (from the
// heater's side) keeps another one from acting on the fan, which shares
// the scope, until it lets go.
func TestSendLocksTheScope(t *testing.T) {
	etcd := testenv.Etcd(t)
	broker := testenv.EmbeddedBroker(t)
	gatewayProc(t, broker)

	out, code := runCLI(t, "send", "--broker", broker, "--gateway", gatewayID(t), "--actuator", "heater", "--etcd", etcd, "--ttl", "5", "on")
	if code != 0 || !strings.Contains(out, "scope climate") || !strings.Contains(out, lease.Key(gatewayID(t), "climate")+"/") {
		t.Fatalf("send --etcd --actuator heater: exit %d, want the lock of scope climate:\n%s", code, out)
	}

	// Hold the climate lease; a send to the fan must wait for it.
	cli := etcdClient(t, etcd)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	held, err := lease.Acquire(ctx, cli, lease.Options{Gateway: gatewayID(t), Scope: "climate", TTL: 5})
	if err != nil {
		t.Fatal(err)
	}
	fan := exec.Command(binary, "send", "--broker", broker, "--gateway", gatewayID(t), "--actuator", "fan", "--etcd", etcd, "--ttl", "5", "on")
	var fanOut bytes.Buffer
	fan.Stdout, fan.Stderr = &fanOut, &fanOut
	if err := fan.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- fan.Wait() }()
	select {
	case err := <-done:
		t.Fatalf("send to the fan finished while the climate lease was held (%v): it locked something else\n%s", err, fanOut.String())
	case <-time.After(2 * time.Second):
	}
	held.Release(context.Background())
	select {
	case err := <-done:
		if err != nil || !strings.Contains(fanOut.String(), `"outcome":"applied"`) || !strings.Contains(fanOut.String(), "scope climate") {
			t.Errorf("send to the fan after the lease was released: %v\n%s", err, fanOut.String())
		}
		if tok := regexp.MustCompile(`granted token (\d+)`).FindStringSubmatch(fanOut.String()); tok == nil || tok[1] == fmt.Sprint(held.Token()) {
			t.Errorf("the fan's token %v must be a grant of its own, above the held one %d", tok, held.Token())
		}
	case <-time.After(20 * time.Second):
		fan.Process.Kill()
		t.Fatalf("send to the fan did not finish after the lease was released\n%s", fanOut.String())
	}
}

// TestFenceAheadOfEtcd: a fence above every revision
// etcd has issued (tokens typed by hand, or an etcd reset or restored from
// an old backup) is said plainly by gateway send, and the example
// controller stops instead of reacquiring its lease in a loop.
func TestFenceAheadOfEtcd(t *testing.T) {
	etcd := testenv.Etcd(t)
	broker := testenv.EmbeddedBroker(t)
	gatewayProc(t, broker)
	if out, code := runCLI(t, "send", "--broker", broker, "--gateway", gatewayID(t), "--actuator", "pump", "--token", "1000000", "fence"); code != 0 {
		t.Fatalf("raise the fence: exit %d\n%s", code, out)
	}
	out, code := runCLI(t, "send", "--broker", broker, "--gateway", gatewayID(t), "--actuator", "pump", "--etcd", etcd, "on")
	if code != exitStale || !strings.Contains(out, "above every revision this etcd has issued") || !strings.Contains(out, "--bump-revision") {
		t.Errorf("send --etcd under a fence above etcd's revision: exit %d, want %d and the explanation:\n%s", code, exitStale, out)
	}

	ctl := exec.Command(exampleController(t), "--etcd", etcd, "--broker", broker, "--gateway", gatewayID(t), "--actuator", "pump", "--ttl", "2", "--period", "200ms")
	var ctlOut bytes.Buffer
	ctl.Stdout, ctl.Stderr = &ctlOut, &ctlOut
	if err := ctl.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- ctl.Wait() }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(ctlOut.String(), "above every revision") {
			t.Errorf("the example controller ended with %v, want a failure that says why:\n%s", err, ctlOut.String())
		}
		if n := strings.Count(ctlOut.String(), "msg=granted"); n != 1 {
			t.Errorf("the example controller was granted %d times, want once: it must stop, not spin\n%s", n, ctlOut.String())
		}
	case <-time.After(30 * time.Second):
		ctl.Process.Kill()
		t.Fatalf("the example controller still runs after 30s: it spins\n%s", ctlOut.String())
	}
}

// TestSendRevokesItsLease: gateway send --etcd keeps its lease alive as
// long as it runs, past its TTL while it waits for an answer, and revokes
// it when done: no lease of it is left in etcd, and the etcd client has
// nothing to warn about (a revoke under a context that had already ended
// left the lease to expire, with a "LeaseRevoke … context canceled"
// warning on every call).
func TestSendRevokesItsLease(t *testing.T) {
	etcd := testenv.Etcd(t)
	broker := testenv.EmbeddedBroker(t)
	gw, _ := gatewayProcess(t, broker)
	cli := etcdClient(t, etcd)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	noLeaseLeft := func(out string) { t.Helper(); leaseRevoked(t, cli, "gateway send", out) }
	base := []string{"send", "--broker", broker, "--gateway", gatewayID(t), "--actuator", "pump", "--etcd", etcd}
	out, code := runCLI(t, append(base, "--ttl", "30", "on")...)
	if code != 0 || !strings.Contains(out, `"outcome":"applied"`) {
		t.Fatalf("send --etcd: exit %d\n%s", code, out)
	}
	noLeaseLeft(out)

	// While the gateway does not answer, the lock stays held past the TTL.
	if err := testenv.Pause(gw.cmd.Process); err != nil {
		t.Skip(err)
	}
	defer testenv.Resume(gw.cmd.Process)
	s := &stoppedSend{out: newOutBuffer(), done: make(chan struct{})} // never stopped: no --stop-after-grant
	s.cmd = exec.Command(binary, append(base, "--ttl", "2", "--timeout", "30s", "off")...)
	s.cmd.Stdout, s.cmd.Stderr = s.out, s.out
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.err = s.cmd.Wait(); close(s.done) }()
	defer func() { s.cmd.Process.Kill(); <-s.done }()
	key := s.out.wait(t, regexp.MustCompile(`granted token \d+ \(lock (\S+),`), s.done, 60*time.Second)
	if key == nil {
		t.Fatalf("gateway send ended (%v) before a grant:\n%s", s.err, s.out)
	}
	time.Sleep(5 * time.Second) // more than twice the TTL
	if resp, err := cli.Get(ctx, key[1]); err != nil || len(resp.Kvs) != 1 {
		t.Errorf("lock %s after 5 s with a 2 s TTL: %v, %v; want it held while gateway send waits for its answer", key[1], resp, err)
	}
	testenv.Resume(gw.cmd.Process)
	select {
	case <-s.done:
	case <-time.After(40 * time.Second):
		t.Fatalf("gateway send did not end after the gateway was continued:\n%s", s.out)
	}
	if s.err != nil || !strings.Contains(s.out.String(), `"outcome":"applied"`) {
		t.Errorf("gateway send: %v\n%s", s.err, s.out)
	}
	noLeaseLeft(s.out.String())
}

// leaseRevoked checks that the program that printed out, which has ended,
// left no lease in etcd and printed no etcd-client warning about one.
func leaseRevoked(t *testing.T, cli *clientv3.Client, program, out string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	leases, err := cli.Leases(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(leases.Leases) != 0 {
		t.Errorf("%d leases left in etcd after %s ended, want none:\n%s", len(leases.Leases), program, out)
	}
	if strings.Contains(out, "LeaseRevoke") || strings.Contains(out, "context canceled") {
		t.Errorf("%s warned about its lease:\n%s", program, out)
	}
}

// TestExampleControllerRevokesOnSIGTERM: the example controller, stopped
// with SIGTERM while it holds its lease, revokes it on its way out, with
// nothing to warn about.
func TestExampleControllerRevokesOnSIGTERM(t *testing.T) {
	etcd := testenv.Etcd(t)
	broker := testenv.EmbeddedBroker(t)
	gatewayProc(t, broker)
	cli := etcdClient(t, etcd)
	c := startExampleCtlOut(t, etcd, broker, "pump", "ctl")
	c.out.wait(t, ctlApplied, nil, 60*time.Second)
	c.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- c.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("the example controller ended with %v after SIGTERM:\n%s", err, c.out)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("the example controller did not end within 20 s of SIGTERM:\n%s", c.out)
	}
	leaseRevoked(t, cli, "the example controller", c.out.String())
}

// etcdClient connects to the etcd at url until t ends.
func etcdClient(t *testing.T, url string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{url}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// TestSendUnderALostLease: gateway send --etcd sends under the lease. One
// stopped after its grant (--stop-under-lease) for longer than the TTL
// finds its lease lost when continued, by its own clock: it publishes
// nothing, says so and exits 8, and the pump's fence never sees its token.
// (--stop-after-grant, the docs' demonstration of a paused controller,
// sends anyway, for the gateway's fence to refuse it.)
func TestSendUnderALostLease(t *testing.T) {
	etcd := testenv.Etcd(t)
	broker := testenv.EmbeddedBroker(t)
	gatewayProc(t, broker)
	s := startStoppedSend(t, "send", "--broker", broker, "--gateway", gatewayID(t), "--actuator", "pump", "--etcd", etcd,
		"--ttl", "2", "--stop-under-lease", "on")
	time.Sleep(4 * time.Second) // twice the TTL: no keep-alive went out meanwhile
	out, code := s.resume(t)
	if code != exitLost || strings.Contains(out, `"outcome"`) || !strings.Contains(out, "is lost") {
		t.Fatalf("gateway send --stop-under-lease, continued after twice its TTL: exit %d; want 8, no answer, and that the lease is lost\n%s", code, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, client.Options{Broker: broker, GatewayID: gatewayID(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	o, err := c.WaitState(ctx, "pump", func(fence.Output) bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	if o.Fence.Token == s.token || o.State == fence.StateOn {
		t.Fatalf("the pump is %s at fence %s after a send under a lost lease (token %d); want nothing of it", o.State, o.Fence, s.token)
	}
}
