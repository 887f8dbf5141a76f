package service_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"

	"github.com/fencegate/fencegate/client"
	"github.com/fencegate/fencegate/config"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/tests/testenv"
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

// BenchmarkFleetApplied: 24 controllers, each with its own actuator (its
// own scope), each sending fresh commands one after the other, so that
// many scopes' commands wait for the store together. Per op: one command.
// It reports the store's syncs per write (applied command).
func BenchmarkFleetApplied(b *testing.B) {
	const actuators = 24
	broker := testenv.EmbeddedBroker(b)
	var cfg strings.Builder
	fmt.Fprintf(&cfg, "id: fleet\nmqtt:\n  broker: %s\nstore: %s\nboard: sim\nhttp: 127.0.0.1:0\nactuators:\n", broker, filepath.Join(b.TempDir(), "fence.db"))
	for i := range actuators {
		fmt.Fprintf(&cfg, "  - {name: a%d, pin: GPIO%d}\n", i, i+2)
	}
	c, err := config.Parse([]byte(cfg.String()))
	if err != nil {
		b.Fatal(err)
	}
	g := startConfig(b, c)
	ctx := context.Background()
	var clients []*client.Client
	for range actuators {
		cl, err := client.Dial(ctx, client.Options{Broker: broker, GatewayID: g.cfg.ID})
		if err != nil {
			b.Fatal(err)
		}
		defer cl.Close()
		clients = append(clients, cl)
	}
	var next atomic.Int64
	before := apiStatus(b, g.info.HTTP).StoreCommits
	b.ResetTimer()
	var wg sync.WaitGroup
	for a := range actuators {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seq := uint64(1); next.Add(1) <= int64(b.N); seq++ {
				res, err := clients[a].Send(ctx, fence.Command{Actuator: fmt.Sprint("a", a), Fence: fence.Fence{Token: 10, Seq: seq},
					State: fence.State(1 + seq%2)})
				if err != nil || res.Outcome != fence.Applied {
					b.Errorf("%+v, %v", res, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	after := apiStatus(b, g.info.HTTP).StoreCommits
	if w := after.Writes - before.Writes; w > 0 {
		b.ReportMetric(2*float64(after.Commits-before.Commits)/float64(w), "syncs/write")
	}
}
