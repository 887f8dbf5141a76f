package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/habridge"
	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/tests/testenv"
	"github.com/fencegate/fencegate/wire"
)

// TestHABridge, end to end on a real broker and a real etcd: the bridge
// announces a switch per actuator whose commands go to the bridge; Home
// Assistant's "on" and "off" reach the gateway as commands with an etcd
// lease's token, and the answers come back as the switch's attributes;
// when another controller raised the scope's fence, the bridge's command
// is stale, and the bridge acquires the lease again and is applied with
// the new, higher token; a payload that is not on or off is rejected and
// sends nothing; Home Assistant's birth message brings the discovery
// again. A set-point output (a Modbus dimmer) is a number: its percent
// reaches the register the fenced way, and a value out of 0 to 100 sends
// nothing.
func TestHABridge(t *testing.T) {
	etcd := testenv.Etcd(t)
	broker := testenv.EmbeddedBroker(t)
	mod, url := tcpModule(t)
	g := startGateway(t, broker, fmt.Sprintf(`modbus:
  - {name: m, url: %q}
actuators:
  - {name: pump, pin: GPIO17}
  - {name: fan, pin: GPIO22}
  - {name: dimmer, modbus: {bus: m, unit: 1, register: 3, full: 1000}}
`, url), false)
	id, ctl := g.id, g.ctl
	topics := wire.Topics{GatewayID: id}

	prefix, bprefix := testenv.ID(t, "ha"), testenv.ID(t, "bridge")
	bridge := startProc(t, nil, "ha-bridge", "--broker", broker, "--gateway", id, "--etcd", etcd, "--actuators", "pump,fan", "--setpoints", "dimmer",
		"--discovery-prefix", prefix, "--bridge-prefix", bprefix, "--ttl", "5", "--name", "ha-test", "--wait", "1s", "--idle", "3s")

	var mu sync.Mutex
	msgs := map[string][][]byte{}
	ha := mqtt.NewClient(mqtt.NewClientOptions().AddBroker(broker).SetClientID(testenv.ID(t, "home-assistant")))
	if tok := ha.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("connect: %v", tok.Error())
	}
	defer ha.Disconnect(0)
	for _, f := range []string{prefix + "/device/+/config", bprefix + "/" + id + "/+/outcome"} {
		if tok := ha.Subscribe(f, 1, func(_ mqtt.Client, m mqtt.Message) {
			mu.Lock()
			msgs[m.Topic()] = append(msgs[m.Topic()], m.Payload())
			mu.Unlock()
		}); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
			t.Fatal(tok.Error())
		}
	}
	wait := func(topic string, n int) []byte {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			mu.Lock()
			got := msgs[topic]
			mu.Unlock()
			if len(got) >= n {
				return got[n-1]
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d messages within 30 s, want %d\nbridge:\n%s", topic, len(got), n, bridge.output())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	config := prefix + "/device/fencegate_" + id + "_bridge/config"
	var disc struct {
		Cmps map[string]struct {
			P            string `json:"p"`
			CommandTopic string `json:"command_topic"`
			StateTopic   string `json:"state_topic"`
		} `json:"cmps"`
	}
	if err := json.Unmarshal(wait(config, 1), &disc); err != nil {
		t.Fatal(err)
	}
	sw := disc.Cmps["fencegate_"+id+"_bridge_pump"]
	if sw.P != "switch" || sw.CommandTopic != bprefix+"/"+id+"/pump/set" || sw.StateTopic != topics.State("pump") {
		t.Fatalf("the pump's switch: %+v", sw)
	}
	if dim := disc.Cmps["fencegate_"+id+"_bridge_dimmer"]; dim.P != "number" || dim.CommandTopic != bprefix+"/"+id+"/dimmer/set" {
		t.Fatalf("the dimmer's number: %+v", dim)
	}
	outcomeTopic := bprefix + "/" + id + "/pump/outcome"
	send := func(actuator, payload string, n int) habridge.Outcome {
		t.Helper()
		if tok := ha.Publish(bprefix+"/"+id+"/"+actuator+"/set", 1, false, payload); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
			t.Fatal(tok.Error())
		}
		var o habridge.Outcome
		if err := json.Unmarshal(wait(bprefix+"/"+id+"/"+actuator+"/outcome", n), &o); err != nil {
			t.Fatal(err)
		}
		return o
	}
	press := func(payload string, n int) habridge.Outcome { t.Helper(); return send("pump", payload, n) }
	on := press("on", 1)
	if on.Outcome != fence.Applied || on.Token == 0 || on.Seq != 0 || on.Asked != "on" {
		t.Fatalf("on: %+v", on)
	}
	st := ctl.State(t, "pump", func(o fence.Output) bool { return o.State == fence.StateOn })
	if st.Holder != "ha-test" || st.Fence != (fence.Fence{Token: on.Token}) {
		t.Errorf("the pump after on: %+v; want held by ha-test at %d/0", st, on.Token)
	}
	if off := press("OFF", 2); off.Outcome != fence.Applied || off.Token != on.Token || off.Seq != 1 {
		t.Errorf("off: %+v; want applied at %d/1", off, on.Token)
	}

	// Another controller raises the scope's fence above the bridge's token.
	if res := ctl.Send(t, fence.Command{ID: id + "-intruder", Actuator: "pump", Holder: "intruder", Fence: fence.Fence{Token: on.Token + 1}}); res.Outcome != fence.Applied {
		t.Fatalf("intruder: %+v", res)
	}
	again := press("on", 3)
	// The outcome is the bridge's last word on this press, and what
	// follows counts on its lease: a wrong one fails now.
	if again.Outcome != fence.Applied || again.Token <= on.Token+1 {
		t.Fatalf("on after another controller raised the fence to %d/0: %+v; want applied with a higher token", on.Token+1, again)
	}
	if !strings.Contains(bridge.output(), "stale: another controller took the scope") {
		t.Errorf("the bridge's log does not say it was stale:\n%s", bridge.output())
	}
	if bad := press("toggle", 4); bad.Outcome != fence.Rejected || bad.Reason != fence.ReasonInvalid {
		t.Errorf("toggle: %+v; want rejected (invalid)", bad)
	}
	// A burst: on, off, on, off, ... sent at once are carried out in that
	// order (the seqs follow it), and the last one holds.
	const burst = 10
	for range burst {
		for _, p := range []string{"on", "off"} {
			if tok := ha.Publish(sw.CommandTopic, 1, false, p); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
				t.Fatal(tok.Error())
			}
		}
	}
	wait(outcomeTopic, 4+2*burst)
	mu.Lock()
	outs := msgs[outcomeTopic][4:]
	mu.Unlock()
	for i, b := range outs {
		var o habridge.Outcome
		json.Unmarshal(b, &o)
		if want := []string{"on", "off"}[i%2]; o.Outcome != fence.Applied || o.Asked != want || o.Seq != again.Seq+1+uint64(i) {
			t.Errorf("burst command %d: %+v; want %s applied at seq %d", i, o, want, again.Seq+1+uint64(i))
		}
	}
	if st := ctl.State(t, "pump", func(o fence.Output) bool { return o.Fence.Seq == again.Seq+2*burst }); st.State != fence.StateOff {
		t.Errorf("the pump after the burst: %+v; want off, the last command's", st)
	}

	// The dimmer's number: percent, fenced, to the register's share of
	// its full scale (1000).
	set := send("dimmer", "42.5", 1)
	if set.Outcome != fence.Applied || set.Asked != "42.5" || set.Token == 0 {
		t.Fatalf("dimmer 42.5: %+v", set)
	}
	if st := ctl.State(t, "dimmer", func(o fence.Output) bool { return o.Duty == 4250 }); st.Holder != "ha-test" || st.State != fence.StateOn {
		t.Errorf("the dimmer after 42.5: %+v; want on at 42.5 %%, held by ha-test", st)
	}
	if got := mod.Register(3); got != 425 {
		t.Errorf("the dimmer's register holds %d after 42.5 %%, want 425", got)
	}
	if bad := send("dimmer", "150", 2); bad.Outcome != fence.Rejected || bad.Reason != fence.ReasonInvalid || bad.Token != 0 {
		t.Errorf("dimmer 150: %+v; want rejected (invalid), nothing sent", bad)
	}
	if off := send("dimmer", "0", 3); off.Outcome != fence.Applied || off.Seq != set.Seq+1 {
		t.Errorf("dimmer 0: %+v; want applied at seq %d", off, set.Seq+1)
	}
	if got := mod.Register(3); got != 0 {
		t.Errorf("the dimmer's register holds %d after 0 %%, want 0", got)
	}

	if tok := ha.Publish(prefix+"/status", 1, false, "online"); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatal(tok.Error())
	}
	wait(config, 2)

	// Another controller holds the fan's scope: the bridge waits --wait,
	// sends nothing, and says why.
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{etcd}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	held, err := lease.Acquire(ctx, cli, lease.Options{Gateway: id, Scope: "fan", TTL: 5})
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(context.Background())
	if tok := ha.Publish(bprefix+"/"+id+"/fan/set", 1, false, "on"); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatal(tok.Error())
	}
	var busy habridge.Outcome
	if err := json.Unmarshal(wait(bprefix+"/"+id+"/fan/outcome", 1), &busy); err != nil {
		t.Fatal(err)
	}
	if busy.Outcome != fence.Failed || !strings.Contains(busy.Error, "another controller has held scope fan's lease for 1s; nothing was sent") {
		t.Errorf("fan on while another controller holds its scope: %+v", busy)
	}
	if o := ctl.State(t, "fan", nil); o.State == fence.StateOn {
		t.Errorf("the fan went on: %+v", o)
	}

	// Idle for --idle, the bridge lets the pump's scope go: another
	// controller gets its lease.
	start := time.Now()
	pump, err := lease.Acquire(ctx, cli, lease.Options{Gateway: id, Scope: "pump", TTL: 5, Wait: 20 * time.Second})
	if err != nil {
		t.Fatalf("the pump's lease after the bridge's idle time: %v\nbridge:\n%s", err, bridge.output())
	}
	defer pump.Release(context.Background())
	if pump.Token() <= again.Token {
		t.Errorf("the pump's lease after the bridge's: token %d, want above the bridge's %d", pump.Token(), again.Token)
	}
	if !strings.Contains(bridge.output(), "letting the scope's lease go after its idle time") {
		t.Errorf("the bridge did not say it let the lease go (acquired after %v):\n%s", time.Since(start), bridge.output())
	}
}
