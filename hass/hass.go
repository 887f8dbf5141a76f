// Package hass describes a gateway to Home Assistant through its MQTT
// discovery (device-based: one retained message for the gateway and all
// its actuators, on <prefix>/device/<id>/config). Each actuator appears as
// a read-only binary sensor that follows the actuator's retained state,
// with its fence token, sequence, holder and scope as attributes, and the
// gateway's status topic as its availability. Nothing here gives Home
// Assistant a command topic: a switch in Home Assistant that published to
// the gateway's command topics would bypass the fencing (no lease, no
// token). Commands come from fenced controllers only.
package hass

import (
	"encoding/json"
	"fmt"

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
}

// URL is fencegate's home, the origin of the discovery message.
const URL = "https://github.com/fencegate/fencegate"

// New returns the gateway's discovery message.
func New(o Options) (Discovery, error) {
	prefix := o.Prefix
	if prefix == "" {
		prefix = DefaultPrefix
	}
	id := "fencegate_" + o.Topics.GatewayID
	cmps := map[string]map[string]any{}
	for _, a := range o.Actuators {
		state := o.Topics.State(a)
		cmps[id+"_"+a] = map[string]any{
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
	}
	msg := map[string]any{
		"dev": map[string]any{
			"ids":  []string{id},
			"name": "fencegate " + o.Topics.GatewayID,
			"mf":   "fencegate",
			"mdl":  "gateway",
			"sw":   o.Version,
		},
		"o":                     map[string]any{"name": "fencegate", "sw": o.Version, "url": URL},
		"availability_topic":    o.Topics.Status(),
		"payload_available":     wire.StatusOnline,
		"payload_not_available": wire.StatusOffline,
		"qos":                   1,
		"cmps":                  cmps,
	}
	b, err := json.Marshal(msg)
	if err != nil {
		return Discovery{}, fmt.Errorf("hass: %w", err)
	}
	return Discovery{Topic: prefix + "/device/" + id + "/config", Payload: b,
		BirthTopic: prefix + "/status", BirthPayload: "online"}, nil
}
