package conformance_test

import (
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"

	"github.com/fencegate/fencegate/tests/testenv"
	"github.com/fencegate/fencegate/wire"
)

// A published is a command as the broker delivered it to a watcher.
type published struct {
	At       time.Time
	Actuator string
	ID       string
	Holder   string
	Token    json.Number
	Topic    string
}

// A watcher records every command published to a gateway, as the broker
// delivers them: what the controllers sent, whatever they report.
type watcher struct {
	mu  sync.Mutex
	got []published
}

// watch subscribes to every command topic of gateway g.
func watch(t *testing.T, g *gateway) *watcher {
	t.Helper()
	w := &watcher{}
	c := mqtt.NewClient(mqtt.NewClientOptions().AddBroker(g.Broker).SetClientID(testenv.ID(t, "watch")).SetOrderMatters(true))
	if tok := c.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("watch: connect: %v", tok.Error())
	}
	t.Cleanup(func() { c.Disconnect(100) })
	topics := wire.Topics{Prefix: wire.DefaultPrefix, GatewayID: g.ID}
	tok := c.Subscribe(topics.SetFilter(), 1, func(_ mqtt.Client, m mqtt.Message) {
		p := published{At: time.Now(), Topic: m.Topic()}
		if l := strings.Split(m.Topic(), "/"); len(l) >= 2 {
			p.Actuator = l[len(l)-2] // <prefix>/<gateway>/<actuator>/set
		}
		var body struct {
			ID     string      `json:"id"`
			Holder string      `json:"holder"`
			Token  json.Number `json:"token"`
		}
		json.Unmarshal(m.Payload(), &body)
		p.ID, p.Holder, p.Token = body.ID, body.Holder, body.Token
		w.mu.Lock()
		w.got = append(w.got, p)
		w.mu.Unlock()
	})
	if !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("watch: subscribe: %v", tok.Error())
	}
	return w
}

// by returns the commands of holder to actuator published at or after
// since.
func (w *watcher) by(holder, actuator string, since time.Time) []published {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.DeleteFunc(slices.Clone(w.got), func(p published) bool {
		return p.Holder != holder || p.Actuator != actuator || p.At.Before(since)
	})
}
