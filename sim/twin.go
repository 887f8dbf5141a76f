package sim

import (
	"strings"
	"sync"

	mqtt "github.com/eclipse/paho.mqtt.golang"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/mqttlink"
)

// TwinTopic is the command topic of an unfenced twin. It is outside the
// gateway's topics on purpose: no gateway ever subscribes to it.
func TwinTopic(gatewayID, name string) string {
	return "fencegate-sim/" + gatewayID + "/unfenced/" + name + "/set"
}

// NarrationTopic carries scenario steps to the dashboard.
func NarrationTopic(gatewayID string) string { return "fencegate-sim/" + gatewayID + "/scenario" }

// Twin is the state of an unfenced twin output.
type Twin struct {
	Name   string `json:"name"`
	Level  string `json:"level"` // high or low
	Holder string `json:"holder,omitempty"`
	Token  uint64 `json:"token,omitempty"`
}

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
	rest := strings.TrimPrefix(m.Topic(), "fencegate-sim/"+gatewayID+"/unfenced/")
	name := strings.TrimSuffix(rest, "/set")
	c, err := mqttlink.DecodeCommand(name, m.Payload())
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
