package main

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencegate/fencegate/tests/testenv"
	"github.com/fencegate/fencegate/lease"
)

// TestSendLocksTheScope (issue 8, point 5): gateway send --etcd locks the
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
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{etcd}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
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

// TestFenceAheadOfEtcd (issue 8, point 12): a fence above every revision
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
