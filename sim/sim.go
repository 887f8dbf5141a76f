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
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"

	"github.com/fencegate/fencegate/boards"
	"github.com/fencegate/fencegate/config"
	"github.com/fencegate/fencegate/httpapi"
	"github.com/fencegate/fencegate/internal/sockerr"
	"github.com/fencegate/fencegate/mqttbroker"
	"github.com/fencegate/fencegate/scenario"
	"github.com/fencegate/fencegate/wire"
)

// Actuator is one of the simulator's example outputs: on a header pin,
// or on a line of one of the sim board's expanders (Chip and Line).
type Actuator struct {
	Name, Pin, Scope, Boot string
	Chip, Line             string
	// Kind "pulse" with its default Pulse and MaxPulse: a door strike.
	Kind            string
	Pulse, MaxPulse time.Duration
	// Requires is an input level without which it does not come on.
	Requires *config.Level
}

// Inputs are the simulator's example inputs, switches on its dashboard:
// window-closed (pulled up: closed until someone opens it), which the
// heater requires, and overheat (pulled down), which trips the climate
// scope (Scopes) to off.
var Inputs = []config.Input{
	{Name: "window-closed", Pin: "GPIO16", Pull: "up", Debounce: 20 * time.Millisecond},
	{Name: "overheat", Pin: "GPIO20", Pull: "down", Debounce: 20 * time.Millisecond},
}

// Actuators are the simulator's example outputs: fan and heater share one
// scope ("climate"), so one lease fences both; vent-open and vent-close are
// a motor's two directions, in one scope and interlocked (Interlocks): at
// most one of them is on; door is a door strike, a pulse output on an
// MCP23017 expander's line; sprinkler's scope has a dead-man (Scopes).
var Actuators = []Actuator{
	{Name: "pump", Pin: "GPIO17", Boot: "last"},
	{Name: "valve", Pin: "GPIO27", Boot: "last"},
	{Name: "fan", Pin: "GPIO22", Scope: "climate", Boot: "last"},
	{Name: "heater", Pin: "GPIO23", Scope: "climate", Boot: "off", Requires: &config.Level{Input: "window-closed", Level: "high"}},
	{Name: "vent-open", Pin: "GPIO5", Scope: "vent", Boot: "off"},
	{Name: "vent-close", Pin: "GPIO6", Scope: "vent", Boot: "off"},
	{Name: "door", Chip: "mcp23017@20", Line: "GPA0", Kind: "pulse", Pulse: time.Second, MaxPulse: 5 * time.Second},
	{Name: "sprinkler", Pin: "GPIO24", Boot: "off"},
}

// Scopes are the simulator's scope rules: the sprinkler's dead-man sends
// it off when its holder has raised no fence for SprinklerDeadman; the
// overheat input trips the climate scope (fan and heater) to off.
var Scopes = []config.ScopeRules{
	{Name: "sprinkler", Safe: &config.Safe{After: SprinklerDeadman, State: "off"}},
	{Name: "climate", Trip: &config.Level{Input: "overheat", Level: "high"}, Safe: &config.Safe{State: "off"}},
}

// SprinklerDeadman is the sprinkler scope's dead-man time: short, so that
// the controller-vanishes scenario can be watched.
const SprinklerDeadman = 5 * time.Second

// Interlocks are the simulator's example interlocks: the vent motor's two
// directions. A command that would turn one on while the other is on is
// rejected; after one goes off, the other comes on no sooner than the dead
// time.
var Interlocks = []config.Interlock{
	{Name: "vent", Actuators: []string{"vent-open", "vent-close"}, DeadTime: 500 * time.Millisecond},
}

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
	for _, a := range Actuators {
		c.Actuators = append(c.Actuators, config.Actuator{Name: a.Name, Pin: a.Pin, Boot: a.Boot, Scope: a.Scope,
			Chip: a.Chip, Line: a.Line, Kind: a.Kind, Pulse: a.Pulse, MaxPulse: a.MaxPulse, Requires: a.Requires})
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

// observe connects the simulator's own MQTT client: it follows the
// gateway's status, serves the unfenced twin and relays scenario narration
// to the dashboard.
func (s *Sim) observe(ctx context.Context) error {
	id := s.opts.GatewayID
	o := mqtt.NewClientOptions().AddBroker(s.BrokerURL).
		SetClientID(fmt.Sprintf("fencegate-sim-observer-%s-%d", id, time.Now().UnixNano())).
		SetCleanSession(true).SetAutoReconnect(true).SetConnectRetry(true).SetOrderMatters(true)
	subs := map[string]byte{
		s.topics().Status():         1,
		scenario.TwinTopic(id, "+"): 1,
		scenario.NarrationTopic(id): 1,
	}
	o.SetOnConnectHandler(func(c mqtt.Client) {
		c.SubscribeMultiple(subs, func(c mqtt.Client, m mqtt.Message) {
			switch topic := m.Topic(); {
			case topic == s.topics().Status():
				s.setGateway(string(m.Payload()))
			case topic == scenario.NarrationTopic(id):
				var n scenario.Narration
				if json.Unmarshal(m.Payload(), &n) == nil {
					s.hub.send(n.Event, json.RawMessage(n.Data))
				}
			default:
				s.twins.command(c, id, m)
			}
		})
	})
	s.observer = mqtt.NewClient(o)
	t := s.observer.Connect()
	select {
	case <-t.Done():
		if err := t.Error(); err != nil {
			return fmt.Errorf("sim: connect to broker %s: %w", s.BrokerURL, err)
		}
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

func (s *Sim) topics() wire.Topics { return wire.Topics{GatewayID: s.opts.GatewayID} }

// setGateway records the gateway's status: its retained status message,
// or what the supervisor saw. Once the supervisor has stopped it for good,
// status messages (its own last "offline", or those of another process
// with its id) change nothing.
func (s *Sim) setGateway(status string) {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return
	}
	s.stopped = strings.HasPrefix(status, stoppedPrefix)
	changed := s.gateway != status
	s.gateway = status
	s.mu.Unlock()
	if changed {
		s.hub.send("gateway", map[string]string{"status": status})
	}
}

func (s *Sim) waitGateway(ctx context.Context, want string) error {
	ch, cancel := s.hub.subscribe()
	defer cancel()
	for {
		s.mu.Lock()
		st, stopped := s.gateway, s.stopped
		s.mu.Unlock()
		if st == want {
			return nil
		}
		if stopped {
			return fmt.Errorf("%w: %s", ErrGatewayStopped, strings.TrimPrefix(st, stoppedPrefix))
		}
		select {
		case <-ch:
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			return fmt.Errorf("gateway is %s: %w", st, ctx.Err())
		}
	}
}

// supervise runs the gateway process and restarts it when it ends, as
// systemd would on a Raspberry Pi.
func (s *Sim) supervise(ctx context.Context, cfgPath string) {
	defer close(s.done)
	log := s.opts.Logger.With("component", "gateway")
	for {
		args := append(append([]string(nil), s.opts.Gateway[1:]...),
			"run", "--config", cfgPath, "--init", "--sim-crash-file", s.crashFile, "--log-level", "warn")
		cmd := exec.Command(s.opts.Gateway[0], args...)
		out := &logWriter{log: log}
		cmd.Stdout, cmd.Stderr = out, out
		dieWithParent(cmd)
		if err := cmd.Start(); err != nil {
			log.Error("cannot start the gateway", "err", err)
			s.setGateway("exited")
			select {
			case <-ctx.Done():
				return
			case <-time.After(2 * time.Second):
				continue
			}
		}
		s.mu.Lock()
		s.pid = cmd.Process.Pid
		s.mu.Unlock()
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		var err error
		select {
		case err = <-exited:
		case <-ctx.Done():
			cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(5 * time.Second):
				cmd.Process.Kill()
				<-exited
			}
			return
		}
		latch, _ := boards.ReadLatch(s.Latch)
		reason := "exited"
		if err != nil {
			reason = err.Error()
		}
		if msg := out.lastError(); msg != "" {
			reason += ": " + msg
		}
		s.mu.Lock()
		s.pid = 0
		s.lastExit = &Exit{At: time.Now().UTC(), Reason: reason, Latch: latch}
		s.mu.Unlock()
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ExitCode() == exitConfig {
			// As systemd's RestartPreventExitStatus: a restart cannot fix a
			// configuration error, such as another gateway with this id.
			log.Error("gateway process stopped; not restarting it: a restart cannot fix this", "reason", reason)
			s.setGateway(stoppedPrefix + reason)
			<-ctx.Done()
			return
		}
		log.Warn("gateway process ended; restarting it", "reason", reason)
		s.setGateway("exited: " + reason)
		select {
		case <-ctx.Done():
			return
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// exitConfig is the gateway's exit status for errors a restart cannot fix.
const exitConfig = 78

// stoppedPrefix starts the gateway's status once the supervisor has
// stopped restarting it.
const stoppedPrefix = "stopped: "

// logWriter passes a child process's output to the log, line by line, and
// keeps its last error message ("gateway: ...").
type logWriter struct {
	log *slog.Logger
	buf []byte

	mu   sync.Mutex
	last string
}

func (w *logWriter) lastError() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last
}

func (w *logWriter) Write(p []byte) (int, error) {
	w.buf = append(w.buf, p...)
	for {
		i := strings.IndexByte(string(w.buf), '\n')
		if i < 0 {
			break
		}
		line := strings.TrimSpace(string(w.buf[:i]))
		w.log.Info(line)
		if msg, ok := strings.CutPrefix(line, "gateway: "); ok {
			w.mu.Lock()
			w.last = msg
			w.mu.Unlock()
		}
		w.buf = w.buf[i+1:]
	}
	return len(p), nil
}

// Info describes the simulator, as GET /api/sim serves it.
func (s *Sim) Info() Info {
	latch, _ := boards.ReadLatch(s.Latch)
	s.mu.Lock()
	defer s.mu.Unlock()
	return Info{GatewayID: s.opts.GatewayID, Prefix: wire.DefaultPrefix, Broker: s.BrokerURL, Gateway: s.gateway, GatewayPID: s.pid,
		Store: s.Store, Latch: latch, LastExit: s.lastExit, Twins: s.twins.list(), Scenarios: scenario.Infos(), Running: s.running}
}

func (s *Sim) serveEvents(w http.ResponseWriter, r *http.Request) {
	ch, cancel := s.hub.subscribe()
	defer cancel()
	httpapi.ServeEvents(w, r, ch)
}

func (s *Sim) startScenario(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if !slices.Contains(scenario.Names(), name) {
		http.Error(w, fmt.Sprintf("unknown scenario %q", name), http.StatusNotFound)
		return
	}
	s.mu.Lock()
	if s.running != "" {
		running := s.running
		s.mu.Unlock()
		http.Error(w, fmt.Sprintf("scenario %s is running; wait for its verdict", running), http.StatusConflict)
		return
	}
	s.running = name
	s.mu.Unlock()
	go func() {
		defer func() {
			s.mu.Lock()
			s.running = ""
			s.mu.Unlock()
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		scenario.Run(ctx, name, scenario.Env{SimURL: "http://" + s.HTTPAddr, Delay: s.opts.StepDelay})
	}()
	w.WriteHeader(http.StatusAccepted)
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
	// Last, once the gateway process is gone: the next simulator on this
	// directory may open the store.
	s.lock.unlock()
}

// hub fans simulator events out to the dashboard's streams.
type hub struct {
	mu   sync.Mutex
	subs map[chan httpapi.Event]struct{}
}

func newHub() *hub { return &hub{subs: map[chan httpapi.Event]struct{}{}} }

func (h *hub) subscribe() (<-chan httpapi.Event, func()) {
	ch := make(chan httpapi.Event, 64)
	h.mu.Lock()
	h.subs[ch] = struct{}{}
	h.mu.Unlock()
	return ch, func() {
		h.mu.Lock()
		delete(h.subs, ch)
		h.mu.Unlock()
	}
}

func (h *hub) send(name string, data any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.subs {
		select {
		case ch <- httpapi.Event{Name: name, Data: data}:
		default:
		}
	}
}

var _ io.Writer = (*logWriter)(nil)
