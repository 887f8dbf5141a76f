// Package hass describes a gateway to Home Assistant through its MQTT
// discovery (device-based: one retained message for the gateway and all
// its actuators, on <prefix>/device/<id>/config). Each actuator appears as
// a read-only binary sensor that follows the actuator's retained state (a
// set-point output as a read-only sensor of its duty, in %), with its
// fence token, sequence, holder and scope as attributes, and the
// gateway's status topic as its availability. Nothing here gives Home
// Assistant a command topic: a switch in Home Assistant that published to
// the gateway's command topics would bypass the fencing (no lease, no
// token). Commands come from fenced controllers only.
package hass

import (
	"encoding/json"
	"fmt"
	"maps"
	"strings"

	"github.com/fencegate/fencegate/wire"
)

// DefaultPrefix is Home Assistant's default discovery prefix.
const DefaultPrefix = "homeassistant"

// Discovery is the gateway's discovery message, and how Home Assistant
// asks for it again.
type Discovery struct {
	// Topic is where the message goes, retained.
	Topic   string
	Payload []byte
	// BirthTopic and BirthPayload are Home Assistant's birth message
	// (<prefix>/status, "online"): at each, the message and every state
	// are published again.
	BirthTopic, BirthPayload string
}

// Options describe the gateway to announce.
type Options struct {
	Prefix    string // "" means DefaultPrefix
	Topics    wire.Topics
	Version   string
	Actuators []string // their names
	// Setpoints are the names of the set-point outputs among Actuators.
	Setpoints map[string]bool
}

// URL is fencegate's home, the origin of the discovery message.
const URL = "https://github.com/fencegate/fencegate"

// New returns the gateway's discovery message.
func New(o Options) (Discovery, error) {
	id := "fencegate_" + o.Topics.GatewayID
	cmps := map[string]map[string]any{}
	for _, a := range o.Actuators {
		state := o.Topics.State(a)
		c := map[string]any{
			"p":              "binary_sensor",
			"name":           a,
			"unique_id":      id + "_" + a,
			"state_topic":    state,
			"value_template": "{{ value_json.state }}",
			"payload_on":     "on",
			"payload_off":    "off",
			// The retained state's fence, holder and scope, as attributes.
			"json_attributes_topic":    state,
			"json_attributes_template": "{{ {'token': value_json.fence.token, 'seq': value_json.fence.seq, 'holder': value_json.holder, 'scope': value_json.scope, 'changed_at': value_json.changed_at} | tojson }}",
		}
		if o.Setpoints[a] {
			// A sensor, not a number: Home Assistant's number entity
			// needs a command topic, which would bypass the fence. The
			// state message leaves the duty out at 0 (off).
			delete(c, "payload_on")
			delete(c, "payload_off")
			c["p"], c["unit_of_measurement"], c["state_class"] = "sensor", "%", "measurement"
			c["value_template"] = "{{ value_json.duty | default(0) }}"
		}
		cmps[id+"_"+a] = c
	}
	return message(o.Prefix, id, "fencegate "+o.Topics.GatewayID, "gateway", o.Version, cmps, map[string]any{
		"availability_topic":    o.Topics.Status(),
		"payload_available":     wire.StatusOnline,
		"payload_not_available": wire.StatusOffline,
	})
}

// message is a device-based discovery message for device id (name, model,
// version) with components cmps and the shared options more, on the
// discovery prefix ("": DefaultPrefix).
func message(prefix, id, name, model, version string, cmps map[string]map[string]any, more map[string]any) (Discovery, error) {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	msg := map[string]any{
		"dev":  map[string]any{"ids": []string{id}, "name": name, "mf": "fencegate", "mdl": model, "sw": version},
		"o":    map[string]any{"name": "fencegate", "sw": version, "url": URL},
		"qos":  1,
		"cmps": cmps,
	}
	for k, v := range more {
		msg[k] = v
	}
	b, err := json.Marshal(msg)
	if err != nil {
		return Discovery{}, fmt.Errorf("hass: %w", err)
	}
	return Discovery{Topic: prefix + "/device/" + id + "/config", Payload: b,
		BirthTopic: prefix + "/status", BirthPayload: "online"}, nil
}

// BridgeTopics are the topics of a Home Assistant bridge for one gateway
// (`gateway ha-bridge`): Home Assistant's switches command it there, and
// it reports there.
type BridgeTopics struct {
	Prefix    string // "" means DefaultBridgePrefix
	GatewayID string
}

// DefaultBridgePrefix begins a bridge's topics.
const DefaultBridgePrefix = "fencegate-ha"

func (t BridgeTopics) base() string {
	p := t.Prefix
	if p == "" {
		p = DefaultBridgePrefix
	}
	return p + "/" + t.GatewayID + "/"
}

// Set is where Home Assistant commands an actuator: "on" or "off".
func (t BridgeTopics) Set(actuator string) string { return t.base() + actuator + "/set" }

// SetFilter matches every Set topic.
func (t BridgeTopics) SetFilter() string { return t.base() + "+/set" }

// Outcome is where the bridge reports, retained, its last command's answer
// for an actuator.
func (t BridgeTopics) Outcome(actuator string) string { return t.base() + actuator + "/outcome" }

// Status is the bridge's availability: "online" while it runs, "offline"
// (its last will) otherwise.
func (t BridgeTopics) Status() string { return t.base() + "status" }

// Actuator returns the actuator a Set topic names.
func (t BridgeTopics) Actuator(topic string) (string, bool) {
	rest, ok := strings.CutPrefix(topic, t.base())
	if !ok {
		return "", false
	}
	name, ok := strings.CutSuffix(rest, "/set")
	return name, ok && name != "" && !strings.Contains(name, "/")
}

// BridgeOptions describe a bridge to announce.
type BridgeOptions struct {
	Prefix  string // the discovery prefix; "" means DefaultPrefix
	Bridge  BridgeTopics
	Gateway wire.Topics
	Name    string // the bridge's name: the holder of its commands
	Version string
	// Actuators get a switch; Setpoints (set-point outputs) a number.
	Actuators, Setpoints []string
}

// NewBridge returns a bridge's discovery message: a switch per actuator
// and a number per set-point output, whose commands go to the bridge
// (never to the gateway), whose state is the actuator's retained state,
// with the bridge's last answer for it as attributes, available while
// both the bridge and the gateway are online.
func NewBridge(o BridgeOptions) (Discovery, error) {
	id := "fencegate_" + o.Gateway.GatewayID + "_bridge"
	cmps := map[string]map[string]any{}
	// add announces actuator a as an entity of platform p with the fields
	// more; the rest is the same for every entity.
	add := func(a, p string, more map[string]any) {
		c := map[string]any{
			"p":                     p,
			"name":                  a,
			"unique_id":             id + "_" + a,
			"command_topic":         o.Bridge.Set(a),
			"state_topic":           o.Gateway.State(a),
			"json_attributes_topic": o.Bridge.Outcome(a),
		}
		maps.Copy(c, more)
		cmps[id+"_"+a] = c
	}
	for _, a := range o.Actuators {
		add(a, "switch", map[string]any{"payload_on": "on", "payload_off": "off",
			"value_template": "{{ value_json.state }}", "state_on": "on", "state_off": "off"})
	}
	for _, a := range o.Setpoints {
		// 0 to 100 %: the output's own min and max (configured on the
		// gateway, which Home Assistant cannot see) are the gateway's to
		// enforce; a set-point outside them is answered rejected (range),
		// in the attributes. The state message leaves the duty out at 0.
		add(a, "number", map[string]any{"value_template": "{{ value_json.duty | default(0) }}",
			"min": 0, "max": 100, "step": 0.01, "unit_of_measurement": "%", "mode": "slider"})
	}
	return message(o.Prefix, id, "fencegate "+o.Gateway.GatewayID+" ("+o.Name+")", "ha-bridge", o.Version, cmps, map[string]any{
		"availability": []map[string]any{
			{"topic": o.Bridge.Status(), "payload_available": wire.StatusOnline, "payload_not_available": wire.StatusOffline},
			{"topic": o.Gateway.Status(), "payload_available": wire.StatusOnline, "payload_not_available": wire.StatusOffline},
		},
		"availability_mode": "all",
	})
}
