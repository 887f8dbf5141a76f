package httpapi

import (
	"strings"
	"testing"
)

// readiness names the check that fails and says why, for each way the
// gateway can be unable to take commands.
func TestReadiness(t *testing.T) {
	ok := Status{Store: "/var/lib/fencegate/fence.db", Reconciled: true, Topics: "fencegate/gw/+/set",
		Broker: Broker{URL: "tcp://127.0.0.1:1883", Connected: true, Subscribed: true}}
	for _, tt := range []struct {
		name   string
		change func(*Status)
		failed string // the check that fails ("" for none)
		detail string
	}{
		{"ready", func(*Status) {}, "", ""},
		{"store broken", func(s *Status) { s.StoreError = "fencelog: the store refused a write" }, "store", "refused a write"},
		{"not reconciled", func(s *Status) { s.Reconciled = false }, "outputs", "not yet reconciled"},
		{"broker down", func(s *Status) {
			s.Broker.Connected, s.Broker.Subscribed, s.Broker.LastError = false, false, "connection refused"
		},
			"broker", "not connected to tcp://127.0.0.1:1883: connection refused"},
		{"connecting", func(s *Status) { s.Broker.Connected, s.Broker.Subscribed = false, false }, "broker", "connecting"},
		{"subscribing", func(s *Status) { s.Broker.Subscribed = false }, "broker", "not yet taking commands"},
		{"conflict", func(s *Status) { s.Broker.Subscribed, s.Broker.Conflict = false, "pid 42 on host a" }, "broker", "another process serves this gateway id: pid 42"},
	} {
		st := ok
		tt.change(&st)
		rd := ReadinessOf(st)
		if rd.Ready != (tt.failed == "") {
			t.Errorf("%s: ready = %v", tt.name, rd.Ready)
		}
		for _, c := range rd.Checks {
			if c.OK != (c.Name != tt.failed) {
				t.Errorf("%s: check %s ok = %v (%s)", tt.name, c.Name, c.OK, c.Detail)
			}
			if c.Name == tt.failed && !strings.Contains(c.Detail, tt.detail) {
				t.Errorf("%s: check %s says %q, want it to say %q", tt.name, c.Name, c.Detail, tt.detail)
			}
		}
		if line := rd.String(); (tt.failed == "") != strings.HasPrefix(line, "ready: connected to") || !strings.Contains(line, tt.detail) {
			t.Errorf("%s: %q", tt.name, line)
		}
		if len(rd.Checks) != 3 {
			t.Errorf("%s: %d checks, want store, outputs and broker", tt.name, len(rd.Checks))
		}
	}
}
