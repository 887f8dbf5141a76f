package sim

import (
	"strings"
	"sync"

	mqtt "github.com/eclipse/paho.mqtt.golang"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/scenario"
	"github.com/fencegate/fencegate/wire"
)

// Twin is the state of an unfenced twin output.
type Twin = scenario.Twin

// twins are sandboxed simulated outputs with NO fence: each obeys the last
// command it hears, whatever its token. They exist only in the simulator, to
// show side by side what fencing prevents; nothing in the gateway's run
// path can reach them.
type twins struct {
	hub *hub
	mu  sync.Mutex
	m   map[string]*Twin
	ord []string
}

func newTwins(h *hub) *twins {
	return &twins{hub: h, m: map[string]*Twin{"pump": {Name: "pump", Level: "low"}}, ord: []string{"pump"}}
}

func (t *twins) command(_ mqtt.Client, gatewayID string, m mqtt.Message) {
	name, ok := twinName(gatewayID, m.Topic())
	if !ok {
		return
	}
	c, err := wire.DecodeCommand(name, m.Payload())
	if err != nil || c.State == fence.StateNone {
		return
	}
	t.mu.Lock()
	tw := t.m[name]
	if tw == nil {
		t.mu.Unlock()
		return
	}
	tw.Level = "low"
	if c.State == fence.StateOn {
		tw.Level = "high"
	}
	tw.Holder, tw.Token = c.Holder, c.Fence.Token
	t.mu.Unlock()
	t.hub.send("twins", t.list())
}

func (t *twins) list() []Twin {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]Twin, 0, len(t.ord))
	for _, n := range t.ord {
		out = append(out, *t.m[n])
	}
	return out
}

// twinName returns the twin a twin command topic names.
func twinName(gatewayID, topic string) (string, bool) {
	prefix, suffix, _ := strings.Cut(scenario.TwinTopic(gatewayID, "\x00"), "\x00")
	rest, ok := strings.CutPrefix(topic, prefix)
	if !ok {
		return "", false
	}
	name, ok := strings.CutSuffix(rest, suffix)
	return name, ok && name != "" && !strings.Contains(name, "/")
}
