package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"

	"github.com/fencegate/fencegate/boards"
	"github.com/fencegate/fencegate/config"
	"github.com/fencegate/fencegate/internal/sockerr"
	"github.com/fencegate/fencegate/modbusio/modbussim"
	"github.com/fencegate/fencegate/mqttbroker"
	"github.com/fencegate/fencegate/scenario"
	"github.com/fencegate/fencegate/wire"
)

// Options configure Start.
type Options struct {
	// MQTTAddr is where the embedded broker listens (127.0.0.1:1883 by
	// default; port 0 picks one). Ignored when Broker is set.
	MQTTAddr string
	// Broker, if set, is an external broker's URL to use instead.
	Broker string
	// HTTPAddr is the dashboard's address (port 0 picks one; empty means
	// 127.0.0.1:8080).
	HTTPAddr string
	// Dir holds the simulator's store, latch and generated configuration.
	Dir string
	// GatewayID names the gateway in topics; default "sim".
	GatewayID string
	// Gateway is the command that runs the gateway binary (its path, and
	// any arguments before "run").
	Gateway []string
	// Logger receives the simulator's and the gateway process's log.
	Logger *slog.Logger
	// StepDelay is the pause between the steps of scenarios started from
	// the dashboard; zero means 1.2 s.
	StepDelay time.Duration
}

// Sim is a running simulator: an embedded broker (unless external), the
// gateway as a supervised child process on the sim board, the unfenced
// twin, and the dashboard.
type Sim struct {
	opts      Options
	BrokerURL string // the broker's URL
	HTTPAddr  string // the dashboard's address
	Store     string
	Latch     string

	broker    *mqttbroker.Broker
	modbus    *modbussim.Module // the Modbus relay module
	observer  mqtt.Client
	hub       *hub
	twins     *twins
	srv       *http.Server
	crashFile string
	apiAddr   string
	lock      *dirLock

	mu       sync.Mutex // guards the fields below
	gateway  string     // starting, online, offline, exited: …, stopped: …
	stopped  bool       // the supervisor will not restart the gateway
	pid      int        // the gateway process's id, 0 while none runs
	lastExit *Exit
	running  string // the scenario running from the dashboard

	cancel context.CancelFunc
	done   chan struct{}
}

// Exit describes how the gateway process last ended, with the latch
// levels read right after, before the restart reconciles them.
type Exit = scenario.Exit

// Info is GET /api/sim.
type Info struct {
	GatewayID string `json:"gateway_id"`
	Prefix    string `json:"prefix"`
	Broker    string `json:"broker"`
	Gateway   string `json:"gateway"`
	// GatewayPID is the gateway process's id; absent while none runs.
	GatewayPID int             `json:"gateway_pid,omitempty"`
	Store      string          `json:"store"`
	Latch      map[string]bool `json:"latch"`
	LastExit   *Exit           `json:"last_exit,omitempty"`
	Twins      []Twin          `json:"twins"`
	Scenarios  []scenario.Info `json:"scenarios"`
	Running    string          `json:"running,omitempty"`
	// Modbus is the simulator's Modbus relay module.
	Modbus Modbus `json:"modbus"`
}

// ErrGatewayStopped is returned (wrapped, with the reason) by Start when
// the gateway process stopped with a configuration error, which a restart
// cannot fix.
var ErrGatewayStopped = errors.New("the gateway process stopped with a configuration error")

// ErrHTTPInUse is returned by Start when the dashboard's address is taken.
var ErrHTTPInUse = errors.New("sim: dashboard address already in use")

// Start starts a simulator and waits until its gateway takes commands.
func Start(ctx context.Context, o Options) (*Sim, error) {
	if o.GatewayID == "" {
		o.GatewayID = "sim"
	}
	if o.MQTTAddr == "" {
		o.MQTTAddr = "127.0.0.1:1883"
	}
	if o.HTTPAddr == "" {
		o.HTTPAddr = "127.0.0.1:8080"
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.StepDelay == 0 {
		o.StepDelay = 1200 * time.Millisecond
	}
	if len(o.Gateway) == 0 {
		return nil, errors.New("sim: no gateway command")
	}
	// The directory's lock before anything else: a second simulator on
	// this directory must not touch the first one's files or ports.
	lock, err := lockDir(o.Dir)
	if err != nil {
		return nil, err
	}
	s := &Sim{opts: o, Store: filepath.Join(o.Dir, "fence.db"), hub: newHub(), gateway: "starting", done: make(chan struct{}), lock: lock}
	s.Latch = s.Store + ".pins"
	s.crashFile = filepath.Join(o.Dir, "crash-after-next-commit")
	os.Remove(s.crashFile)
	ok := false
	defer func() {
		if !ok {
			s.closeParts()
		}
	}()

	// The dashboard's port first: the error a person most likely meets.
	ln, err := net.Listen("tcp", o.HTTPAddr)
	if err != nil {
		if sockerr.AddrInUse(err) {
			return nil, fmt.Errorf("%w: %s", ErrHTTPInUse, o.HTTPAddr)
		}
		return nil, fmt.Errorf("sim: dashboard: %w", err)
	}
	s.HTTPAddr = ln.Addr().String()
	if err := lock.record(Owner{PID: os.Getpid(), Dashboard: s.HTTPAddr}); err != nil {
		ln.Close()
		return nil, err
	}

	s.BrokerURL = o.Broker
	if s.BrokerURL == "" {
		b, err := mqttbroker.Start(o.MQTTAddr, o.Logger.With("component", "broker"))
		if err != nil {
			ln.Close()
			return nil, err
		}
		s.broker = b
		s.BrokerURL = b.URL()
	}
	if s.modbus, err = startModbus(); err != nil {
		ln.Close()
		return nil, err
	}
	apiPort, err := freePort()
	if err != nil {
		ln.Close()
		return nil, err
	}
	s.apiAddr = fmt.Sprintf("127.0.0.1:%d", apiPort)
	cfgPath := filepath.Join(o.Dir, "gateway.yaml")
	text, err := s.config().Marshal("Generated by gateway sim; edits are overwritten.")
	if err != nil {
		ln.Close()
		return nil, err
	}
	if err := os.WriteFile(cfgPath, text, 0o640); err != nil {
		ln.Close()
		return nil, fmt.Errorf("sim: %w", err)
	}

	s.twins = newTwins(s.hub)
	if err := s.observe(ctx); err != nil {
		ln.Close()
		return nil, err
	}

	target := &url.URL{Scheme: "http", Host: s.apiAddr}
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.FlushInterval = -1 // stream the gateway's events
	proxy.ErrorHandler = s.gatewayUnavailable
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/sim", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(s.Info())
	})
	mux.HandleFunc("GET /api/sim/events", s.serveEvents)
	mux.HandleFunc("POST /api/sim/scenarios/{name}", s.startScenario)
	mux.HandleFunc("POST /api/sim/crash", func(w http.ResponseWriter, r *http.Request) {
		if err := os.WriteFile(s.crashFile, nil, 0o640); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /api/sim/inputs/{name}", func(w http.ResponseWriter, r *http.Request) {
		// A switch on the dashboard: the input's line, as the sim board
		// reads it from its inputs file.
		var body struct{ Level string }
		if err := json.NewDecoder(io.LimitReader(r.Body, 1024)).Decode(&body); err != nil || (body.Level != "high" && body.Level != "low") {
			http.Error(w, `want {"level":"high"} or {"level":"low"}`, http.StatusBadRequest)
			return
		}
		i := slices.IndexFunc(Inputs, func(in config.Input) bool { return in.Name == r.PathValue("name") })
		if i < 0 {
			http.Error(w, "no such input", http.StatusNotFound)
			return
		}
		if err := boards.SetSimInput(boards.InputPath(s.Store), Inputs[i].Pin, body.Level == "high"); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	s.serveModbus(mux)
	mux.HandleFunc("POST /api/sim/kill", func(w http.ResponseWriter, r *http.Request) {
		// A crash now, wherever the gateway is: SIGKILL, as a power cut
		// would leave it (the pulse-crash scenario kills it mid-pulse).
		s.mu.Lock()
		pid := s.pid
		s.mu.Unlock()
		if pid == 0 {
			http.Error(w, "no gateway process runs", http.StatusConflict)
			return
		}
		proc, err := os.FindProcess(pid)
		if err == nil {
			err = proc.Kill()
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.Handle("/", proxy)
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go s.srv.Serve(ln)

	runCtx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	go s.supervise(runCtx, cfgPath)

	waitCtx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	if err := s.waitGateway(waitCtx, "online"); err != nil {
		return nil, fmt.Errorf("sim: the gateway did not come up: %w", err)
	}
	ok = true
	return s, nil
}

// config is the simulator gateway's configuration.
func (s *Sim) config() *config.Config {
	c := &config.Config{ID: s.opts.GatewayID, MQTT: config.MQTT{Broker: s.BrokerURL},
		Store: s.Store, Board: config.BoardSim, HTTP: &s.apiAddr}
	c.Modbus = []config.ModbusBus{{Name: ModbusBus, URL: s.modbus.URL(), Poll: ModbusPoll}}
	for _, a := range Actuators {
		ca := config.Actuator{Name: a.Name, Pin: a.Pin, Boot: a.Boot, Scope: a.Scope,
			Chip: a.Chip, Line: a.Line, Kind: a.Kind, Pulse: a.Pulse, MaxPulse: a.MaxPulse, Requires: a.Requires}
		if a.Coil != nil {
			ca.Modbus = &config.ModbusOutput{Bus: ModbusBus, Unit: 1, Coil: a.Coil}
		}
		if a.Register != nil {
			ca.Modbus = &config.ModbusOutput{Bus: ModbusBus, Unit: 1, Register: a.Register, Full: ptr(a.Full)}
		}
		c.Actuators = append(c.Actuators, ca)
	}
	c.Interlocks = Interlocks
	c.Scopes = Scopes
	c.Inputs = Inputs
	return c
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("sim: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// Info describes the simulator, as GET /api/sim serves it.
func (s *Sim) Info() Info {
	latch, _ := boards.ReadLatch(s.Latch)
	s.mu.Lock()
	defer s.mu.Unlock()
	return Info{GatewayID: s.opts.GatewayID, Prefix: wire.DefaultPrefix, Broker: s.BrokerURL, Gateway: s.gateway, GatewayPID: s.pid,
		Store: s.Store, Latch: latch, LastExit: s.lastExit, Twins: s.twins.list(), Scenarios: scenario.Infos(), Running: s.running,
		Modbus: s.modbusInfo()}
}

// Close stops the gateway process, the dashboard and the broker.
func (s *Sim) Close() error {
	s.closeParts()
	return nil
}

func (s *Sim) closeParts() {
	if s.cancel != nil {
		s.cancel()
		<-s.done
	}
	if s.srv != nil {
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		s.srv.Shutdown(sctx)
		cancel()
	}
	if s.observer != nil {
		s.observer.Disconnect(100)
	}
	if s.broker != nil {
		s.broker.Close()
	}
	if s.modbus != nil {
		s.modbus.Close()
	}
	// Last, once the gateway process is gone: the next simulator on this
	// directory may open the store.
	s.lock.unlock()
}

var _ io.Writer = (*logWriter)(nil)
