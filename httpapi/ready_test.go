package httpapi

import (
	"net/url"
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

// The audit trail's filters: good ones are read, bad ones refused with
// what is wrong.
func TestParseAuditQuery(t *testing.T) {
	for _, tt := range []struct {
		query, err string
	}{
		{"", ""},
		{"n=100&actuator=pump&outcome=stale&holder=ctl-a&since=2026-12-03T07:00:00Z&until=2026-12-03T08:00:00.5Z", ""},
		{"outcome=interlock", ""},
		{"n=0", "n: want a number from 1 to 10000"},
		{"n=10001", "n: want a number from 1 to 10000"},
		{"outcome=maybe", `outcome="maybe": want one of`},
		{"since=yesterday", `since="yesterday": want an RFC 3339 time`},
		{"until=2026-12-03", `until="2026-12-03": want an RFC 3339 time`},
	} {
		v, _ := url.ParseQuery(tt.query)
		q, err := ParseAuditQuery(v)
		switch {
		case tt.err == "" && err != nil:
			t.Errorf("%q: %v", tt.query, err)
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("%q: %v, want an error saying %q", tt.query, err, tt.err)
		}
		if tt.query == "" && q.Limit != 50 {
			t.Errorf("the default n is %d, want 50", q.Limit)
		}
	}
}
