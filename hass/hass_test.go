package hass

import (
	"encoding/json"
	"maps"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/wire"
)

// The fields Home Assistant documents for MQTT discovery (its MQTT
// integration's page, "Device discovery payload", and the MQTT binary
// sensor's page), abbreviations included, at each level of a device-based
// discovery message. A field outside these is ignored, or refused, by
// Home Assistant.
var (
	docRoot = set("dev", "device", "o", "origin", "cmps", "components", "availability", "availability_topic", "avty_t",
		"availability_mode", "availability_template", "payload_available", "pl_avail", "payload_not_available", "pl_not_avail",
		"command_topic", "state_topic", "qos", "encoding")
	docDevice = set("ids", "identifiers", "name", "mf", "manufacturer", "mdl", "model", "model_id", "sw", "sw_version",
		"hw", "hw_version", "sn", "serial_number", "cns", "connections", "via_device", "suggested_area", "configuration_url")
	docOrigin       = set("name", "sw", "sw_version", "url", "support_url")
	docBinarySensor = set("p", "platform", "availability", "availability_topic", "availability_mode", "availability_template",
		"device_class", "enabled_by_default", "encoding", "entity_category", "entity_picture", "expire_after", "force_update",
		"icon", "json_attributes_template", "json_attributes_topic", "name", "object_id", "default_entity_id", "off_delay",
		"payload_available", "payload_not_available", "payload_off", "payload_on", "qos", "state_topic", "unique_id", "value_template")
)

func set(keys ...string) map[string]bool {
	m := map[string]bool{}
	for _, k := range keys {
		m[k] = true
	}
	return m
}

func checkKeys(t *testing.T, where string, m map[string]any, doc map[string]bool) {
	t.Helper()
	for k := range m {
		if !doc[k] {
			t.Errorf("%s: field %q is not one Home Assistant documents", where, k)
		}
	}
}

// The discovery message, field by field: the documented fields only;
// device and origin with their required parts; one read-only binary
// sensor per actuator, each with a unique id, following the actuator's
// retained state; no command topic anywhere; the gateway's status as the
// availability; and a topic and ids Home Assistant accepts.
func TestDiscoveryPayload(t *testing.T) {
	topics := wire.Topics{GatewayID: "greenhouse-1"}
	d, err := New(Options{Topics: topics, Version: "v1.2.3", Actuators: []string{"pump", "vent-open", "vent-close"}})
	if err != nil {
		t.Fatal(err)
	}
	if d.Topic != "homeassistant/device/fencegate_greenhouse-1/config" || !regexp.MustCompile(`^homeassistant/device/[A-Za-z0-9_-]+/config$`).MatchString(d.Topic) {
		t.Errorf("topic %q", d.Topic)
	}
	if d.BirthTopic != "homeassistant/status" || d.BirthPayload != "online" {
		t.Errorf("birth message %q %q, want homeassistant/status online (Home Assistant's default)", d.BirthTopic, d.BirthPayload)
	}
	if strings.Contains(string(d.Payload), "command_topic") || strings.Contains(string(d.Payload), "cmd_t") {
		t.Errorf("the discovery message gives Home Assistant a command topic: %s", d.Payload)
	}
	var msg map[string]any
	if err := json.Unmarshal(d.Payload, &msg); err != nil {
		t.Fatal(err)
	}
	checkKeys(t, "root", msg, docRoot)
	dev, _ := msg["dev"].(map[string]any)
	checkKeys(t, "dev", dev, docDevice)
	if ids, _ := dev["ids"].([]any); len(ids) != 1 || ids[0] != "fencegate_greenhouse-1" || dev["name"] == "" || dev["sw"] != "v1.2.3" {
		t.Errorf("dev = %v", dev)
	}
	o, _ := msg["o"].(map[string]any)
	checkKeys(t, "o", o, docOrigin)
	if o["name"] != "fencegate" || o["url"] != URL {
		t.Errorf("o = %v (name is required)", o)
	}
	if msg["availability_topic"] != topics.Status() || msg["payload_available"] != wire.StatusOnline || msg["payload_not_available"] != wire.StatusOffline {
		t.Errorf("availability: %v %v %v", msg["availability_topic"], msg["payload_available"], msg["payload_not_available"])
	}
	cmps, _ := msg["cmps"].(map[string]any)
	if len(cmps) != 3 {
		t.Fatalf("%d components, want one per actuator", len(cmps))
	}
	ids := map[string]bool{}
	for key, v := range cmps {
		c := v.(map[string]any)
		checkKeys(t, "cmps."+key, c, docBinarySensor)
		if !regexp.MustCompile(`^[A-Za-z0-9_-]+$`).MatchString(key) {
			t.Errorf("component id %q: Home Assistant takes [A-Za-z0-9_-]", key)
		}
		name, _ := c["name"].(string)
		uid, _ := c["unique_id"].(string)
		if c["p"] != "binary_sensor" || uid == "" || ids[uid] {
			t.Errorf("%s: platform %v, unique_id %q (required, and unique)", key, c["p"], uid)
		}
		ids[uid] = true
		if c["state_topic"] != topics.State(name) || c["json_attributes_topic"] != topics.State(name) ||
			c["payload_on"] != "on" || c["payload_off"] != "off" {
			t.Errorf("%s: %v", key, c)
		}
	}
}

// The templates read fields that a real state message has: the state, and
// the fence's token and seq, the holder, the scope and the time as
// attributes.
func TestTemplatesReadTheState(t *testing.T) {
	var state map[string]any
	at := time.Date(2026, 12, 3, 7, 24, 48, 0, time.UTC)
	if err := json.Unmarshal(wire.EncodeState(fence.Output{Actuator: "pump", Scope: "pump", State: fence.StateOn,
		Fence: fence.Fence{Token: 42, Seq: 3}, Holder: "ctl-b", ChangedAt: at}), &state); err != nil {
		t.Fatal(err)
	}
	d, _ := New(Options{Topics: wire.Topics{GatewayID: "gw"}, Actuators: []string{"pump"}})
	for _, path := range regexp.MustCompile(`value_json\.([a-z_.]+)`).FindAllStringSubmatch(string(d.Payload), -1) {
		var v any = state
		for _, k := range strings.Split(path[1], ".") {
			m, ok := v.(map[string]any)
			if !ok {
				v = nil
				break
			}
			v = m[k]
		}
		if v == nil {
			t.Errorf("a template reads value_json.%s, which a state message does not have: %v", path[1], state)
		}
	}
}

// The fields Home Assistant documents for an MQTT switch.
var docSwitch = set("p", "platform", "availability", "availability_topic", "availability_mode", "availability_template",
	"command_template", "command_topic", "device_class", "enabled_by_default", "encoding", "entity_category", "entity_picture",
	"icon", "json_attributes_template", "json_attributes_topic", "name", "object_id", "default_entity_id", "optimistic",
	"payload_available", "payload_not_available", "payload_off", "payload_on", "qos", "retain", "state_off", "state_on",
	"state_topic", "unique_id", "value_template")

// The fields Home Assistant documents for an MQTT number.
var docNumber = set("p", "platform", "availability", "availability_topic", "availability_mode", "availability_template",
	"command_template", "command_topic", "device_class", "enabled_by_default", "encoding", "entity_category", "entity_picture",
	"icon", "json_attributes_template", "json_attributes_topic", "max", "min", "mode", "name", "object_id", "default_entity_id",
	"optimistic", "payload_reset", "qos", "retain", "state_topic", "step", "unique_id", "unit_of_measurement", "value_template")

// The bridge's discovery message, field by field: documented fields only;
// a switch per actuator and a number (0 to 100 %, the protocol's step) per
// set-point output, whose commands go to the bridge's topic, never the
// gateway's; the actuator's retained state as its state (a set-point's
// duty, 0 when the state leaves it out); the bridge's outcome as its
// attributes; available only while both the bridge and the gateway are.
func TestBridgeDiscoveryPayload(t *testing.T) {
	gw := wire.Topics{Prefix: wire.DefaultPrefix, GatewayID: "greenhouse-1"}
	bt := BridgeTopics{GatewayID: "greenhouse-1"}
	d, err := NewBridge(BridgeOptions{Bridge: bt, Gateway: gw, Name: "ha-bridge", Version: "v1", Actuators: []string{"pump", "fan"},
		Setpoints: []string{"dimmer"}})
	if err != nil {
		t.Fatal(err)
	}
	if d.Topic != "homeassistant/device/fencegate_greenhouse-1_bridge/config" {
		t.Errorf("topic %q", d.Topic)
	}
	var msg map[string]any
	if err := json.Unmarshal(d.Payload, &msg); err != nil {
		t.Fatal(err)
	}
	checkKeys(t, "root", msg, set("dev", "o", "cmps", "availability", "availability_mode", "qos"))
	checkKeys(t, "root", msg, docRoot)
	checkKeys(t, "dev", msg["dev"].(map[string]any), docDevice)
	checkKeys(t, "o", msg["o"].(map[string]any), docOrigin)
	avty, _ := msg["availability"].([]any)
	if len(avty) != 2 || msg["availability_mode"] != "all" {
		t.Errorf("availability %v, mode %v: want the bridge's and the gateway's status, both", avty, msg["availability_mode"])
	}
	for _, a := range avty {
		checkKeys(t, "availability", a.(map[string]any), set("topic", "payload_available", "payload_not_available", "value_template"))
	}
	kinds := map[string]string{}
	for key, v := range msg["cmps"].(map[string]any) {
		c := v.(map[string]any)
		name := c["name"].(string)
		kinds[name] = c["p"].(string)
		if name == "dimmer" {
			checkKeys(t, "cmps."+key, c, docNumber)
			if c["min"] != 0.0 || c["max"] != 100.0 || c["step"] != 0.01 || c["unit_of_measurement"] != "%" ||
				c["value_template"] != "{{ value_json.duty | default(0) }}" {
				t.Errorf("%s: %v; want 0 to 100 %% in steps of 0.01, the state's duty", key, c)
			}
		} else {
			checkKeys(t, "cmps."+key, c, docSwitch)
		}
		if c["command_topic"] != bt.Set(name) || strings.HasPrefix(c["command_topic"].(string), gw.Prefix+"/") ||
			c["state_topic"] != gw.State(name) || c["json_attributes_topic"] != bt.Outcome(name) || c["unique_id"] == "" {
			t.Errorf("%s: %v", key, c)
		}
		if a, ok := bt.Actuator(bt.Set(name)); !ok || a != name {
			t.Errorf("BridgeTopics.Actuator(%q) = %q, %v", bt.Set(name), a, ok)
		}
	}
	if want := map[string]string{"pump": "switch", "fan": "switch", "dimmer": "number"}; !maps.Equal(kinds, want) {
		t.Errorf("entities %v, want %v", kinds, want)
	}
}

// The fields Home Assistant documents for an MQTT sensor.
var docSensor = set("p", "platform", "availability", "availability_topic", "availability_mode", "availability_template",
	"device_class", "enabled_by_default", "encoding", "entity_category", "entity_picture", "expire_after", "force_update",
	"icon", "json_attributes_template", "json_attributes_topic", "last_reset_value_template", "name", "object_id", "default_entity_id",
	"options", "payload_available", "payload_not_available", "qos", "state_class", "state_topic", "suggested_display_precision",
	"unique_id", "unit_of_measurement", "value_template")

// A set-point output is a read-only sensor of its duty, in %: no command
// topic (a number entity would need one), and its template reads the
// duty a real state message carries, 0 when it leaves it out (off).
func TestSetpointDiscovery(t *testing.T) {
	topics := wire.Topics{GatewayID: "gw"}
	d, err := New(Options{Topics: topics, Actuators: []string{"pump", "fan"}, Setpoints: map[string]bool{"fan": true}})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(d.Payload), "command_topic") {
		t.Fatalf("the discovery message gives Home Assistant a command topic: %s", d.Payload)
	}
	var msg struct{ Cmps map[string]map[string]any }
	if err := json.Unmarshal(d.Payload, &msg); err != nil {
		t.Fatal(err)
	}
	fan, pump := msg.Cmps["fencegate_gw_fan"], msg.Cmps["fencegate_gw_pump"]
	checkKeys(t, "fan", fan, docSensor)
	if fan["p"] != "sensor" || fan["unit_of_measurement"] != "%" || fan["state_topic"] != topics.State("fan") || fan["value_template"] != "{{ value_json.duty | default(0) }}" {
		t.Errorf("fan = %v", fan)
	}
	if pump["p"] != "binary_sensor" {
		t.Errorf("pump = %v", pump)
	}
	var state map[string]any
	if err := json.Unmarshal(wire.EncodeState(fence.Output{Actuator: "fan", State: fence.StateOn, Duty: 4250}), &state); err != nil || state["duty"] != 42.5 {
		t.Errorf("a set-point's state message: %v, %v; want duty 42.5", state, err)
	}
}
