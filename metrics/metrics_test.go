package metrics

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/fencegate/fencegate/actuator"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/fencelog"
)

// The metrics follow Prometheus's naming rules, as the client library's
// own linter reads them, and count what the hooks report: commands by
// actuator, outcome and reason, with names from the network that are not
// actuators under one label; the store's commits, syncs and size from a
// real store.
func TestMetrics(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fence.db")
	m := New([]string{"pump"})
	l, err := fencelog.Open(path, &fencelog.Options{Create: fencelog.Fresh(), OnCommit: m.OnCommit})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	m.Read(Sources{Store: l.Stats, StorePath: path, Fences: l.Fences,
		Broker: func() Broker {
			return Broker{Connected: true, Subscribed: true, Connects: 2, FailedAttempts: 3, LastError: "refused"}
		},
		Version: "v1.2.3"})
	if _, err := l.Admit("pump", fence.Command{ID: "b-1", Actuator: "pump", Fence: fence.Fence{Token: 42, Seq: 7}, State: fence.StateOn}, fence.Rules{}, nil); err != nil {
		t.Fatal(err)
	}
	ob := m.Observer()
	for _, r := range []fence.Result{
		{Actuator: "pump", Outcome: fence.Applied},
		{Actuator: "pump", Outcome: fence.Stale},
		{Actuator: "pump", Outcome: fence.Stale},
		{Actuator: "no-such-thing", Outcome: fence.Rejected, Reason: fence.ReasonUnknownActuator},
		{Actuator: "another", Outcome: fence.Rejected, Reason: fence.ReasonUnknownActuator},
	} {
		ob.Decided(actuator.Event{Result: r})
	}
	ob.Admitted(time.Millisecond, 3)
	ob.Driven("pump", time.Microsecond, nil)

	problems, err := testutil.CollectAndLint(m.reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
	for _, tt := range []struct {
		labels []string
		want   float64
	}{
		{[]string{"pump", "applied", ""}, 1},
		{[]string{"pump", "stale", ""}, 2},
		{[]string{Unknown, "rejected", fence.ReasonUnknownActuator}, 2},
	} {
		if got := testutil.ToFloat64(m.commands.WithLabelValues(tt.labels...)); got != tt.want {
			t.Errorf("fencegate_commands_total%v = %v, want %v", tt.labels, got, tt.want)
		}
	}
	want := `
# HELP fencegate_scope_fence_token Token of each scope's fence.
# TYPE fencegate_scope_fence_token gauge
fencegate_scope_fence_token{scope="pump"} 42
# HELP fencegate_scope_fence_seq Sequence number of each scope's fence.
# TYPE fencegate_scope_fence_seq gauge
fencegate_scope_fence_seq{scope="pump"} 7
# HELP fencegate_broker_connections_total Connections to the broker made since the gateway started (more than 1: reconnects).
# TYPE fencegate_broker_connections_total counter
fencegate_broker_connections_total 2
# HELP fencegate_build_info The gateway's version and Go version (value 1).
# TYPE fencegate_build_info gauge
`
	if err := testutil.CollectAndCompare(m.reg, strings.NewReader(want), "fencegate_scope_fence_token", "fencegate_scope_fence_seq",
		"fencegate_broker_connections_total"); err != nil {
		t.Error(err)
	}
	st := l.Stats()
	for _, name := range []string{"fencegate_store_commits_total", "fencegate_store_syncs_total", "fencegate_store_writes_total",
		"fencegate_audit_dropped_total", "fencegate_store_size_bytes", "fencegate_store_filesystem_free_bytes",
		"fencegate_store_filesystem_size_bytes", "fencegate_store_commit_duration_seconds", "fencegate_admission_duration_seconds",
		"fencegate_drive_duration_seconds", "fencegate_broker_connected", "fencegate_broker_subscribed",
		"fencegate_broker_connect_failures_total", "fencegate_broker_last_error_timestamp_seconds", "fencegate_poison_messages_total", "fencegate_build_info"} {
		if n, err := testutil.GatherAndCount(m.reg, name); err != nil || n == 0 {
			t.Errorf("%s: %d series, %v; want it exported", name, n, err)
		}
	}
	if want := 2 * float64(st.Commits); st.Commits == 0 || want != gathered(t, m, "fencegate_store_syncs_total") {
		t.Errorf("fencegate_store_syncs_total = %v, want 2 × %d commits", gathered(t, m, "fencegate_store_syncs_total"), st.Commits)
	}
}

// gathered returns the value of the metric name without labels.
func gathered(t *testing.T, m *Metrics, name string) float64 {
	t.Helper()
	mfs, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			mt := mf.GetMetric()[0]
			if c := mt.GetCounter(); c != nil {
				return c.GetValue()
			}
			return mt.GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}
