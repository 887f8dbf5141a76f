package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"

	"github.com/fencegate/fencegate/boards"
	"github.com/fencegate/fencegate/scenario"
	"github.com/fencegate/fencegate/wire"
)

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
