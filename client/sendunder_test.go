package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencegate/fencegate/client"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/tests/testenv"
	"github.com/fencegate/fencegate/wire"
)

// acquire takes a real etcd lease of scope pump of gateway gw, with an
// etcd client of its own: closing that client cuts the holder off, as a
// partition or a pause past the TTL does.
func acquire(t *testing.T, gw string) (*lease.Lease, *clientv3.Client) {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{testenv.Etcd(t)}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	l, err := lease.Acquire(ctx, cli, lease.Options{Gateway: gw, Scope: "pump", TTL: 3})
	if err != nil {
		t.Fatal(err)
	}
	return l, cli
}

// A controller whose lease is lost between its decision and its send
// publishes nothing: SendUnder checks the lease just before the publish.
// A held lease's command is published and answered as Send's.
func TestSendUnderALostLeasePublishesNothing(t *testing.T) {
	broker := testenv.EmbeddedBroker(t)
	gateway(t, broker)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, client.Options{Broker: broker, GatewayID: "gw"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	w := watchCommands(t, broker, wire.Topics{Prefix: wire.DefaultPrefix, GatewayID: "gw"})
	l, cut := acquire(t, testenv.ID(t, "gw"))

	on := fence.Command{ID: "held", Actuator: "pump", Fence: fence.Fence{Token: l.Token()}, State: fence.StateOn}
	if r, err := c.SendUnder(ctx, l, on); err != nil || r.Outcome != fence.Applied {
		t.Fatalf("SendUnder(held lease) = %v, %v; want applied", r.Outcome, err)
	}
	if _, err := c.SendUnder(ctx, l, fence.Command{ID: "other", Actuator: "pump", Fence: fence.Fence{Token: l.Token() + 1}, State: fence.StateOff}); err == nil {
		t.Fatal("SendUnder sent a command whose token is not its lease's")
	}

	cut.Close()
	select {
	case <-l.Lost():
	case <-time.After(10 * time.Second):
		t.Fatal("the lease was not lost 10 s after its etcd client closed")
	}
	off := fence.Command{ID: "after-loss", Actuator: "pump", Fence: fence.Fence{Token: l.Token(), Seq: 1}, State: fence.StateOff}
	r, err := c.SendUnder(ctx, l, off)
	if !errors.Is(err, lease.ErrLost) || r.Outcome != "" {
		t.Fatalf("SendUnder(lost lease) = %+v, %v; want no answer and an error that is lease.ErrLost", r, err)
	}
	t.Log(err)
	if n := w.wait("after-loss", 1, time.Second); n != 0 {
		t.Fatalf("%d copies of the command under the lost lease were published; want none", n)
	}
	if n := w.wait("other", 1, 10*time.Millisecond); n != 0 {
		t.Fatalf("the command with another token was published")
	}
}

// Once the lease is lost after a first publish, no more copies are
// published: the gateway is stopped, so the first copy goes unanswered,
// and resends would otherwise follow every Resend interval.
func TestSendUnderStopsResendingOnceLost(t *testing.T) {
	broker := testenv.EmbeddedBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, client.Options{Broker: broker, GatewayID: "gw", Resend: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	w := watchCommands(t, broker, wire.Topics{Prefix: wire.DefaultPrefix, GatewayID: "gw"})
	l, cut := acquire(t, testenv.ID(t, "gw"))
	sent := make(chan error, 1)
	sctx, stop := context.WithTimeout(ctx, 4*time.Second)
	defer stop()
	go func() {
		_, err := c.SendUnder(sctx, l, fence.Command{ID: "unanswered", Actuator: "pump", Fence: fence.Fence{Token: l.Token()}, State: fence.StateOn})
		sent <- err
	}()
	if n := w.wait("unanswered", 2, 5*time.Second); n < 2 {
		t.Fatalf("%d copies published; want the command resent while the lease is held", n)
	}
	cut.Close()
	<-l.Lost()
	before := w.wait("unanswered", 1000, 100*time.Millisecond)
	if err := <-sent; !errors.Is(err, client.ErrTimeout) {
		t.Fatalf("SendUnder = %v; want ErrTimeout (no answer came)", err)
	}
	if after := w.wait("unanswered", 1000, 100*time.Millisecond); after != before {
		t.Fatalf("%d copies published after the lease was lost; want none", after-before)
	}
}
