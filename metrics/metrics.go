// Package metrics exports the gateway's workings as Prometheus metrics
// (GET /metrics): its decisions, the time admission, commits and drives
// take, the store's syncs, size and free space, every scope's fence, and
// the broker connection. The safety core reports to it through hooks
// (actuator.Observer, fencelog.Options.OnCommit) and plain reads; nothing
// here can change a decision, and nothing in the core imports this
// package.
package metrics

import (
	"maps"
	"net/http"
	"runtime"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/fencegate/fencegate/actuator"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/fencelog"
)

// Sources are what the metrics read when they are scraped.
type Sources struct {
	// Store returns the store's commit counts; StorePath is its file.
	Store     func() fencelog.Stats
	StorePath string
	// Fences returns every scope's fence.
	Fences func() (map[string]fence.Fence, error)
	// Broker returns the broker connection's state.
	Broker func() Broker
	// Watched returns the watched outputs' health (on Modbus devices), by
	// actuator.
	Watched func() map[string]actuator.Health
	// Duties returns the set-point outputs' recorded set-points, by
	// actuator.
	Duties func() map[string]fence.Duty
	// Version is the gateway's version, for fencegate_build_info.
	Version string
}

// Broker is the broker connection's state, as the metrics show it.
type Broker struct {
	Connected, Subscribed    bool
	Connects, FailedAttempts int
	LastError                string
	LastErrorAt              time.Time
	// Poison counts the commands acknowledged without their answer: the
	// broker closed the connection each time the answer was written.
	Poison int
}

// Unknown is the actuator label of commands to actuators not configured.
const Unknown = "(unknown)"

// Metrics holds the gateway's metrics.
type Metrics struct {
	reg      *prometheus.Registry
	known    map[string]bool
	commands *prometheus.CounterVec
	admit    prometheus.Histogram
	commit   prometheus.Histogram
	drive    *prometheus.HistogramVec
}

// durations are the buckets of the latency histograms, in seconds: 50 µs
// (a commit on a fast SSD) to about 3 s (a dying SD card), each twice the
// one before.
var durations = prometheus.ExponentialBuckets(50e-6, 2, 17)

// New makes the metrics of one gateway whose configured actuators are
// actuators: the counts that its hooks (Observer, OnCommit) feed from
// now on. A command to any other name is counted under actuator
// "(unknown)": names come from the network, and each would be a series
// of its own. Read adds the metrics read when they are scraped.
func New(actuators []string) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry(), known: map[string]bool{}}
	for _, a := range actuators {
		m.known[a] = true
	}
	m.commands = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fencegate_commands_total",
		Help: "Commands answered, by actuator, outcome (applied, duplicate, stale, rejected, failed) and reason (of a rejection).",
	}, []string{"actuator", "outcome", "reason"})
	m.admit = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "fencegate_admission_duration_seconds",
		Help:    "Time to decide and record one actuator's queued commands together (one observation per admission), the store's commit included.",
		Buckets: durations,
	})
	m.commit = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "fencegate_store_commit_duration_seconds",
		Help:    "Time of each commit of the fence store, its two syncs included.",
		Buckets: durations,
	})
	m.drive = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "fencegate_drive_duration_seconds",
		Help:    "Time to drive an output, by actuator.",
		Buckets: durations,
	}, []string{"actuator"})
	m.reg.MustRegister(m.commands, m.admit, m.commit, m.drive,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Read adds the metrics read from src when they are scraped: once, when
// every source is there, before the metrics are served.
func (m *Metrics) Read(src Sources) { m.reg.MustRegister(&scrape{src: src}) }

// Observer is the bank's hook into the metrics (actuator.Options.Observer).
func (m *Metrics) Observer() *actuator.Observer {
	return &actuator.Observer{
		Decided: func(e actuator.Event) {
			m.commands.WithLabelValues(m.actuator(e.Result.Actuator), string(e.Result.Outcome), e.Result.Reason).Inc()
		},
		Admitted: func(took time.Duration, _ int) { m.admit.Observe(took.Seconds()) },
		Driven: func(name string, took time.Duration, _ error) {
			m.drive.WithLabelValues(m.actuator(name)).Observe(took.Seconds())
		},
	}
}

// OnCommit is the store's hook into the metrics (fencelog.Options.OnCommit).
func (m *Metrics) OnCommit(took time.Duration, _ int) { m.commit.Observe(took.Seconds()) }

func (m *Metrics) actuator(name string) string {
	if m.known[name] {
		return name
	}
	return Unknown
}

// Handler serves the metrics in Prometheus's text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// scrape collects the metrics read when scraped.
type scrape struct{ src Sources }

var (
	descCommits = prometheus.NewDesc("fencegate_store_commits_total",
		"Commits of the fence store since the gateway started.", nil, nil)
	descSyncs = prometheus.NewDesc("fencegate_store_syncs_total",
		"Syncs (fdatasync) of the fence store since the gateway started: two per commit.", nil, nil)
	descWrites = prometheus.NewDesc("fencegate_store_writes_total",
		"Writes the store's commits held (admissions of an actuator's commands, state changes, audit flushes).", nil, nil)
	descDropped = prometheus.NewDesc("fencegate_audit_dropped_total",
		"Audit entries of stale, duplicate and rejected commands dropped unwritten in a flood.", nil, nil)
	descSize = prometheus.NewDesc("fencegate_store_size_bytes",
		"Size of the fence store's file.", nil, nil)
	descFree = prometheus.NewDesc("fencegate_store_filesystem_free_bytes",
		"Space the gateway's user may still use on the store's file system.", nil, nil)
	descFSSize = prometheus.NewDesc("fencegate_store_filesystem_size_bytes",
		"Size of the store's file system.", nil, nil)
	descToken = prometheus.NewDesc("fencegate_scope_fence_token",
		"Token of each scope's fence.", []string{"scope"}, nil)
	descSeq = prometheus.NewDesc("fencegate_scope_fence_seq",
		"Sequence number of each scope's fence.", []string{"scope"}, nil)
	descConnected = prometheus.NewDesc("fencegate_broker_connected",
		"1 while the MQTT connection is up.", nil, nil)
	descSubscribed = prometheus.NewDesc("fencegate_broker_subscribed",
		"1 while the gateway takes commands: connected, subscribed, and alone with its gateway id.", nil, nil)
	descConnects = prometheus.NewDesc("fencegate_broker_connections_total",
		"Connections to the broker made since the gateway started (more than 1: reconnects).", nil, nil)
	descFailures = prometheus.NewDesc("fencegate_broker_connect_failures_total",
		"Failed connection attempts since the gateway started.", nil, nil)
	descLastError = prometheus.NewDesc("fencegate_broker_last_error_timestamp_seconds",
		"When the newest connection failure happened (Unix time; 0 if none), with its reason as a label.", []string{"reason"}, nil)
	descPoison = prometheus.NewDesc("fencegate_poison_messages_total",
		"Commands acknowledged without their answer because the broker closed the connection each time it was written (decided and recorded as any other).", nil, nil)
	descDown = prometheus.NewDesc("fencegate_output_down",
		"1 while a watched output's device (a Modbus module) does not answer: the gateway retries its recorded state.", []string{"actuator"}, nil)
	descOutOfBand = prometheus.NewDesc("fencegate_output_out_of_band_total",
		"Times a watched output was found changed behind the gateway's back (and driven as the boot rule says).", []string{"actuator"}, nil)
	descLateWrites = prometheus.NewDesc("fencegate_output_late_writes_total",
		"Times a write of the gateway's own that had failed as timed out was found carried out late by its device (a Modbus module), not counted as out of band.", []string{"actuator"}, nil)
	descDuty = prometheus.NewDesc("fencegate_output_duty_percent",
		"A set-point output's recorded set-point, percent (0: off).", []string{"actuator"}, nil)
	descBuild = prometheus.NewDesc("fencegate_build_info",
		"The gateway's version and Go version (value 1).", []string{"version", "goversion"}, nil)
)

func (s *scrape) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descCommits, descSyncs, descWrites, descDropped, descSize, descFree, descFSSize,
		descToken, descSeq, descConnected, descSubscribed, descConnects, descFailures, descLastError, descPoison, descDown, descOutOfBand, descDuty, descBuild} {
		ch <- d
	}
	ch <- descLateWrites
}

func (s *scrape) Collect(ch chan<- prometheus.Metric) {
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	bool01 := func(b bool) float64 {
		if b {
			return 1
		}
		return 0
	}
	gauge(descBuild, 1, s.src.Version, runtime.Version())
	if s.src.Store != nil {
		st := s.src.Store()
		counter(descCommits, float64(st.Commits))
		counter(descSyncs, 2*float64(st.Commits))
		counter(descWrites, float64(st.Writes))
		counter(descDropped, float64(st.AuditDropped))
	}
	if s.src.StorePath != "" {
		if size, err := fileSize(s.src.StorePath); err == nil {
			gauge(descSize, float64(size))
		}
		if free, total, err := diskSpace(s.src.StorePath); err == nil {
			gauge(descFree, float64(free))
			gauge(descFSSize, float64(total))
		}
	}
	if s.src.Fences != nil {
		if fences, err := s.src.Fences(); err == nil {
			names := make([]string, 0, len(fences))
			for n := range fences {
				names = append(names, n)
			}
			slices.Sort(names)
			for _, n := range names {
				gauge(descToken, float64(fences[n].Token), n)
				gauge(descSeq, float64(fences[n].Seq), n)
			}
		}
	}
	if s.src.Broker != nil {
		b := s.src.Broker()
		gauge(descConnected, bool01(b.Connected))
		gauge(descSubscribed, bool01(b.Subscribed))
		counter(descConnects, float64(b.Connects))
		counter(descFailures, float64(b.FailedAttempts))
		at := 0.0
		if !b.LastErrorAt.IsZero() {
			at = float64(b.LastErrorAt.UnixNano()) / 1e9
		}
		gauge(descLastError, at, b.LastError)
		counter(descPoison, float64(b.Poison))
	}
	if s.src.Watched != nil {
		hs := s.src.Watched()
		for _, n := range slices.Sorted(maps.Keys(hs)) {
			gauge(descDown, bool01(hs[n].Down != ""), n)
			counter(descOutOfBand, float64(hs[n].OutOfBand), n)
			counter(descLateWrites, float64(hs[n].LateWrites), n)
		}
	}
	if s.src.Duties != nil {
		ds := s.src.Duties()
		for _, n := range slices.Sorted(maps.Keys(ds)) {
			gauge(descDuty, float64(ds[n])/100, n)
		}
	}
}
