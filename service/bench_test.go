package service_test

import (
	"context"
	"testing"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"

	"github.com/fencegate/fencegate/client"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/internal/testenv"
)

// The command benchmarks measure a controller's round trip (publish the
// command, receive the answer) through a real gateway and broker. Compare
// them with BenchmarkBrokerFloor, the broker's own publish→subscriber round
// trip, and with fencelog's BenchmarkCommitFloor (one fsynced bbolt commit),
// taken in the same run: applied ≈ broker floor ×2 + one commit; stale ≈
// broker floor ×2.
//
//	go test ./service -run '^$' -bench . -benchtime 3s

// BenchmarkBrokerFloor: publish QoS 1 to a topic the same client subscribes
// to, and wait for the message.
func BenchmarkBrokerFloor(b *testing.B) {
	for name, startBroker := range testenv.Brokers() {
		b.Run(name, func(b *testing.B) {
			broker := startBroker(b)
			c := mqtt.NewClient(mqtt.NewClientOptions().AddBroker(broker).SetClientID("floor").SetOrderMatters(false))
			if tok := c.Connect(); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
				b.Fatal(tok.Error())
			}
			defer c.Disconnect(0)
			got := make(chan struct{}, 1)
			if tok := c.Subscribe("floor/x", 1, func(mqtt.Client, mqtt.Message) { got <- struct{}{} }); !tok.WaitTimeout(5 * time.Second) {
				b.Fatal("subscribe")
			}
			for b.Loop() {
				c.Publish("floor/x", 1, false, []byte(`{"token":1}`))
				<-got
			}
		})
	}
}

func benchCommands(b *testing.B, stale bool) {
	for name, startBroker := range testenv.Brokers() {
		b.Run(name, func(b *testing.B) {
			broker := startBroker(b)
			g := start(b, broker, b.TempDir())
			ctx := context.Background()
			c, err := client.Dial(ctx, client.Options{Broker: broker, GatewayID: g.cfg.ID})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			if _, err := c.Send(ctx, fence.Command{Actuator: "pump", Fence: fence.Fence{Token: 1 << 40}, State: fence.StateOn}); err != nil {
				b.Fatal(err)
			}
			tok := uint64(1 << 40)
			for b.Loop() {
				cmd := fence.Command{Actuator: "pump", Fence: fence.Fence{Token: 1}, State: fence.StateOff}
				if !stale {
					tok++
					cmd.Fence.Token = tok
				}
				res, _ := c.Send(ctx, cmd)
				if (res.Outcome == fence.Applied) == stale {
					b.Fatalf("outcome %v", res.Outcome)
				}
			}
		})
	}
}

// BenchmarkCommandApplied: each command carries a fresh token, so each is
// recorded with fsync and driven.
func BenchmarkCommandApplied(b *testing.B) { benchCommands(b, false) }

// BenchmarkCommandStale: each command is below the fence: answered from a
// read-only decision, no fsync.
func BenchmarkCommandStale(b *testing.B) { benchCommands(b, true) }
