package main

import (
	"net/http"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/tests/testenv"
)

// TestMetricsEndpoint: a running gateway serves GET /metrics in
// Prometheus's text format, and its figures follow the commands: counts
// by actuator, outcome and reason (an unknown actuator's name under
// "(unknown)"), the scope's fence, the store's commits and syncs, the
// admission, commit and drive histograms, the broker connection.
func TestMetricsEndpoint(t *testing.T) {
	g := startGateway(t, testenv.EmbeddedBroker(t), "actuators:\n  - {name: pump, pin: GPIO17}\n", true)
	id, httpAddr, ctl := g.id, g.http, g.ctl

	before := scrape(t, httpAddr)
	send := func(c fence.Command, want fence.Outcome) {
		t.Helper()
		if res := ctl.Send(t, c); res.Outcome != want {
			t.Fatalf("%s: %v (%s), want %v", c.ID, res.Outcome, res.Error, want)
		}
	}
	send(fence.Command{ID: id + "-1", Actuator: "pump", Fence: fence.Fence{Token: 42, Seq: 1}, State: fence.StateOn}, fence.Applied)
	send(fence.Command{ID: id + "-2", Actuator: "pump", Fence: fence.Fence{Token: 42, Seq: 2}, State: fence.StateOff}, fence.Applied)
	send(fence.Command{ID: id + "-1", Actuator: "pump", Fence: fence.Fence{Token: 42, Seq: 1}, State: fence.StateOn}, fence.Duplicate)
	send(fence.Command{ID: id + "-3", Actuator: "pump", Fence: fence.Fence{Token: 41}, State: fence.StateOn}, fence.Stale)
	send(fence.Command{ID: id + "-4", Actuator: "no-such-pump", Fence: fence.Fence{Token: 50}, State: fence.StateOn}, fence.Rejected)
	after := scrape(t, httpAddr)

	for _, tt := range []struct {
		labels map[string]string
		want   float64
	}{
		{map[string]string{"actuator": "pump", "outcome": "applied", "reason": ""}, 2},
		{map[string]string{"actuator": "pump", "outcome": "duplicate", "reason": ""}, 1},
		{map[string]string{"actuator": "pump", "outcome": "stale", "reason": ""}, 1},
		{map[string]string{"actuator": "(unknown)", "outcome": "rejected", "reason": fence.ReasonUnknownActuator}, 1},
	} {
		if got := value(after, "fencegate_commands_total", tt.labels) - value(before, "fencegate_commands_total", tt.labels); got != tt.want {
			t.Errorf("fencegate_commands_total%v rose by %v, want %v", tt.labels, got, tt.want)
		}
	}
	if got := value(after, "fencegate_scope_fence_token", map[string]string{"scope": "pump"}); got != 42 {
		t.Errorf("fencegate_scope_fence_token{scope=pump} = %v, want 42", got)
	}
	if got := value(after, "fencegate_scope_fence_seq", map[string]string{"scope": "pump"}); got != 2 {
		t.Errorf("fencegate_scope_fence_seq{scope=pump} = %v, want 2", got)
	}
	commits := value(after, "fencegate_store_commits_total", nil) - value(before, "fencegate_store_commits_total", nil)
	syncs := value(after, "fencegate_store_syncs_total", nil) - value(before, "fencegate_store_syncs_total", nil)
	if commits < 2 || syncs != 2*commits {
		t.Errorf("over two applied commands: %v commits and %v syncs; want at least 2, and two syncs each", commits, syncs)
	}
	for _, h := range []string{"fencegate_admission_duration_seconds", "fencegate_store_commit_duration_seconds", "fencegate_drive_duration_seconds"} {
		if n := count(after, h) - count(before, h); n < 2 {
			t.Errorf("%s: %v more observations after two applied commands, want 2 or more", h, n)
		}
	}
	if got := value(after, "fencegate_broker_connected", nil); got != 1 {
		t.Errorf("fencegate_broker_connected = %v, want 1", got)
	}
	if got := value(after, "fencegate_store_size_bytes", nil); got <= 0 {
		t.Errorf("fencegate_store_size_bytes = %v, want the store's size", got)
	}
	if got := value(after, "fencegate_store_filesystem_free_bytes", nil); got <= 0 {
		t.Errorf("fencegate_store_filesystem_free_bytes = %v, want the free space", got)
	}
	if n := len(after["fencegate_build_info"].GetMetric()); n != 1 {
		t.Errorf("fencegate_build_info: %d series, want 1", n)
	}
}

// scrape reads GET /metrics.
func scrape(t *testing.T, addr string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s", resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	return mfs
}

// waitMetric waits until the gateway's API at addr shows want for the
// series of name whose labels include labels.
func waitMetric(t *testing.T, addr, name string, labels map[string]string, want float64) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		got := value(scrape(t, addr), name, labels)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s%v = %v after 20 s, want %v", name, labels, got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// find returns the series of name whose labels include labels.
func find(mfs map[string]*dto.MetricFamily, name string, labels map[string]string) *dto.Metric {
	for _, m := range mfs[name].GetMetric() {
		match := 0
		for _, l := range m.GetLabel() {
			if v, ok := labels[l.GetName()]; ok && v == l.GetValue() {
				match++
			}
		}
		if match == len(labels) {
			return m
		}
	}
	return nil
}

// value is a counter's or gauge's value (0 if the series is missing).
func value(mfs map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	m := find(mfs, name, labels)
	if c := m.GetCounter(); c != nil {
		return c.GetValue()
	}
	return m.GetGauge().GetValue()
}

// count is a histogram's number of observations, all series together.
func count(mfs map[string]*dto.MetricFamily, name string) float64 {
	var n float64
	for _, m := range mfs[name].GetMetric() {
		n += float64(m.GetHistogram().GetSampleCount())
	}
	return n
}
