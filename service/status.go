package service

import (
	"fmt"
	"runtime"
	"runtime/metrics"
	"time"

	"github.com/fencegate/fencegate/actuator"
	"github.com/fencegate/fencegate/config"
	"github.com/fencegate/fencegate/fencelog"
	"github.com/fencegate/fencegate/httpapi"
	gwmetrics "github.com/fencegate/fencegate/metrics"
	"github.com/fencegate/fencegate/mqttlink"
	"github.com/fencegate/fencegate/wire"
)

// source is what the HTTP API reads: the bank, the gateway's status, its
// inputs and its event stream.
type source struct {
	*actuator.Bank
	*status
	*inputs
	*events // the event stream
}

// status answers GET /api/status.
type status struct {
	cfg     *config.Config
	opts    Options
	store   *fencelog.Store
	link    *mqttlink.Link
	bank    *actuator.Bank
	started time.Time
}

// stallMargin is what a command's own work (its commit, its drives) may
// add to an interlock's dead time before the watchdog takes its scope for
// stuck.
const stallMargin = 5 * time.Second

// readiness judges the gateway's status (GET /readyz).
func (s *status) readiness() httpapi.Readiness { return httpapi.ReadinessOf(s.Status()) }

// stalled says why the decision path has stood still for longer than
// limit: a store commit, or a scope held without progress; "" if neither.
func stalled(store *fencelog.Store, bank *actuator.Bank, limit time.Duration) string {
	if d := store.CommitRunning(); d > limit {
		return fmt.Sprintf("a commit of the fence store has run for %v", d.Round(time.Millisecond))
	}
	if sc, d := bank.Stalled(limit); sc != "" {
		return fmt.Sprintf("scope %s has been held for %v without progress", sc, d.Round(time.Millisecond))
	}
	return ""
}

// down lists the watched outputs whose devices do not answer.
func (s *status) down() []httpapi.DownOutput {
	var out []httpapi.DownOutput
	hs := s.bank.Healths()
	for _, a := range s.cfg.Actuators {
		if h := hs[a.Name]; h.Down != "" {
			out = append(out, httpapi.DownOutput{Actuator: a.Name, Reason: h.Down, Since: h.Since})
		}
	}
	return out
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// Status implements httpapi.Source.
func (s *status) Status() httpapi.Status {
	return httpapi.Status{
		GatewayID:     s.cfg.ID,
		Version:       s.opts.Version,
		Started:       s.started,
		Board:         s.cfg.Board,
		Store:         s.cfg.Store,
		StoreID:       s.store.ID(),
		StoreFloor:    s.store.Birth().Floor,
		StoreFloorWhy: s.store.Birth().Why,
		StoreCommits:  s.store.Stats(),
		StoreError:    errText(s.store.Err()),
		Reconciled:    s.bank.Started(),
		Down:          s.down(),
		Broker:        broker(s.link.Status()),
		Topics:        wire.Topics{Prefix: s.cfg.MQTT.TopicPrefix, GatewayID: s.cfg.ID}.SetFilter(),
		Runtime:       readRuntime(),
	}
}

// runtimeMetrics are the runtime/metrics samples of httpapi.Runtime, in
// its fields' order.
var runtimeMetrics = []string{"/memory/classes/heap/objects:bytes", "/gc/heap/live:bytes"}

// readRuntime reads the process's goroutines and heap without stopping the
// world (runtime.ReadMemStats would). A metric this Go release lacks reads
// as 0.
func readRuntime() httpapi.Runtime {
	samples := make([]metrics.Sample, len(runtimeMetrics))
	for i, name := range runtimeMetrics {
		samples[i].Name = name
	}
	metrics.Read(samples)
	u := func(s metrics.Sample) uint64 {
		if s.Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return s.Value.Uint64()
	}
	return httpapi.Runtime{Goroutines: runtime.NumGoroutine(), HeapBytes: u(samples[0]), HeapLiveBytes: u(samples[1])}
}

func broker(m mqttlink.Status) httpapi.Broker {
	return httpapi.Broker{URL: m.Broker, ClientID: m.ClientID, Connected: m.Connected, Since: m.Since, Subscribed: m.Subscribed,
		LastError: m.LastError, LastErrorAt: m.LastErrorAt, Failures: m.Failures, Conflict: m.Conflict,
		Poison: m.Poison, LastPoison: m.LastPoison, LastPoisonAt: m.LastPoisonAt}
}

// brokerMetrics is the broker connection as the metrics show it.
func brokerMetrics(m mqttlink.Status) gwmetrics.Broker {
	return gwmetrics.Broker{Connected: m.Connected, Subscribed: m.Subscribed, Connects: m.Connects,
		FailedAttempts: m.FailedAttempts, LastError: m.LastError, LastErrorAt: m.LastErrorAt, Poison: m.Poison}
}
