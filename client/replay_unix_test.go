//go:build unix

package client_test

import (
	"context"
	"encoding/json"
	"syscall"
	"testing"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"

	"github.com/fencegate/fencegate/client"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/tests/testenv"
	"github.com/fencegate/fencegate/wire"
)

// A command published under a lease while the broker hangs is not
// acknowledged; paho keeps it and publishes it again, by itself, once it
// has reconnected. If the lease was lost meanwhile, that copy must not
// go out: SendUnder's copies are kept from paho's replay once their lease
// is lost. A watcher whose session the broker keeps across its crash
// (saved at a clean restart before) receives every publish made after
// the broker is back, before the watcher itself reconnects.
func TestNoReplayUnderALostLease(t *testing.T) {
	b := testenv.MosquittoPersistent(t)
	topics := wire.Topics{Prefix: wire.DefaultPrefix, GatewayID: "gw"}
	watchID := testenv.ID(t, "watch")
	var got []string
	watcher := func() mqtt.Client {
		c := mqtt.NewClient(mqtt.NewClientOptions().AddBroker(b.URL).SetClientID(watchID).SetCleanSession(false).
			SetDefaultPublishHandler(func(_ mqtt.Client, m mqtt.Message) {
				var cmd struct{ ID string }
				json.Unmarshal(m.Payload(), &cmd)
				got = append(got, cmd.ID)
			}))
		if tok := c.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
			t.Fatalf("watch: connect: %v", tok.Error())
		}
		return c
	}
	w := watcher()
	if tok := w.Subscribe(topics.SetFilter(), 1, nil); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("watch: subscribe: %v", tok.Error())
	}
	w.Disconnect(100)
	b.Stop(t, syscall.SIGTERM) // saves the watcher's session
	b.Start(t)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, client.Options{Broker: b.URL, GatewayID: "gw", Resend: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	l, cut := acquire(t, testenv.ID(t, "gw"))

	b.Pause(t) // the broker hangs: the publish goes out, unacknowledged
	sent := make(chan error, 1)
	go func() {
		_, err := c.SendUnder(ctx, l, fence.Command{ID: "under-lost", Actuator: "pump", Fence: fence.Fence{Token: l.Token()}, State: fence.StateOn})
		sent <- err
	}()
	time.Sleep(500 * time.Millisecond) // published into the hung broker's socket
	cut.Close()
	select {
	case <-l.Lost():
	case <-time.After(10 * time.Second):
		t.Fatal("the lease was not lost 10 s after its etcd client closed")
	}
	b.Stop(t, syscall.SIGKILL) // the hung broker is killed, and started again
	b.Start(t)
	// The client reconnects (paho waits 1 s, then 2 s, ...) and would
	// publish its unacknowledged copy again.
	for deadline := time.Now().Add(20 * time.Second); !c.Connected(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the client did not reconnect within 20 s")
		}
	}
	time.Sleep(time.Second)
	w = watcher() // its session, restored from the clean restart, queued what came
	time.Sleep(time.Second)
	w.Disconnect(100)
	for _, id := range got {
		if id == "under-lost" {
			t.Fatalf("a copy of the command was published after its lease was lost (watched: %v)", got)
		}
	}
	cancel()
	<-sent
}
