//go:build linux

package torture

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fencegate/fencegate/client"
	"github.com/fencegate/fencegate/wire"
)

// actuator is one of the torture gateway's actuators: on a pin of the sim
// board, or, with pin "", on coil 0 of the harness's Modbus TCP module.
type actuator struct {
	name, pin, scope string
	activeLow        bool
}

// actuators are the torture gateway's: scopes of one actuator (one of
// them active low, one on a Modbus module), a scope of two, and an
// interlocked pair.
var actuators = []actuator{
	{"lamp", "", "lamp", false},
	{"pump", "GPIO17", "pump", false},
	{"valve", "GPIO27", "valve", true},
	{"fan", "GPIO22", "climate", false},
	{"heater", "GPIO23", "climate", true},
	{"vent-open", "GPIO5", "vent", false},
	{"vent-close", "GPIO6", "vent", false},
}

// interlocked are the members of the one interlock, in scope vent.
var interlocked = []string{"vent-open", "vent-close"}

// The controller's settings, from the environment the harness sets.
const (
	envBroker  = "FENCEGATE_TORTURE_BROKER"
	envGateway = "FENCEGATE_TORTURE_GATEWAY"
	envIndex   = "FENCEGATE_TORTURE_INDEX"
	envSeed    = "FENCEGATE_TORTURE_CONTROLLER_SEED"
	envResend  = "FENCEGATE_TORTURE_RESEND"
	envLog     = "FENCEGATE_TORTURE_LOG"
)

// Send's time limits: a resending controller waits for its answer through
// any restart; one that does not resend gives up on a command that a
// clean stop's broker dropped.
const (
	resendingWait = 60 * time.Second
	onceWait      = 5 * time.Second
)

// statusWait bounds how long a controller waits to see the gateway's
// status the harness asks about.
const statusWait = 60 * time.Second

// controllerMain is a controller process: it sends commands until its
// standard input closes, then finishes the commands it is sending and
// exits. Each line "now" on its standard input makes it send one more
// command at once, besides the one it may be waiting for: a new lease's
// fence-only command. A line "online" or "offline" makes it log when its
// client has seen the gateway's status be that (see harness.awaitSeen).
// Each command, each answer and each such status goes to its log (JSON
// lines).
func controllerMain() int {
	if err := runController(); err != nil {
		fmt.Fprintln(os.Stderr, "torture controller:", err)
		return 1
	}
	return 0
}

func runController() error {
	idx, err := strconv.Atoi(os.Getenv(envIndex))
	if err != nil || idx < 0 || idx > 15 {
		return fmt.Errorf("%s=%q: want 0 to 15", envIndex, os.Getenv(envIndex))
	}
	seed, err := strconv.ParseUint(os.Getenv(envSeed), 10, 64)
	if err != nil {
		return fmt.Errorf("%s: %w", envSeed, err)
	}
	resend := os.Getenv(envResend) == "1"
	logf, err := os.OpenFile(os.Getenv(envLog), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	var logMu sync.Mutex
	write := func(l logLine) {
		l.Ctl = idx
		b, _ := json.Marshal(l)
		logMu.Lock()
		defer logMu.Unlock()
		logf.Write(append(b, '\n')) // one write per line: the harness reads while it grows
	}

	opts := client.Options{Broker: os.Getenv(envBroker), GatewayID: os.Getenv(envGateway),
		ClientID: fmt.Sprintf("%s-ctl%d", os.Getenv(envGateway), idx), Resend: -1}
	wait := onceWait
	if resend {
		opts.Resend, wait = 200*time.Millisecond, resendingWait
	}
	dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	cl, err := client.Dial(dctx, opts)
	cancel()
	if err != nil {
		return err
	}
	defer cl.Close()

	p := newPlanner(idx, seed)
	var ops atomic.Int64
	send := func(kind string, c command) {
		op := int(ops.Add(1))
		write(logLine{Ev: "call", Op: op, T: now(), Kind: kind, Cmd: &c})
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		res, err := cl.Send(ctx, c.fence())
		cancel()
		l := logLine{Ev: "ret", Op: op, T: now()}
		if res.Outcome != "" {
			a := answerOf(res)
			l.Res = &a
		}
		var stale *client.StaleError
		var rejected *client.RejectedError
		if err != nil && !errors.As(err, &stale) && !errors.As(err, &rejected) {
			l.Err = err.Error()
		}
		write(l)
		p.sent(c)
	}
	stop := make(chan struct{})
	var extras sync.WaitGroup
	defer extras.Wait()
	go func() {
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			switch line := sc.Text(); line {
			case "now":
				extras.Add(1)
				go func() {
					defer extras.Done()
					send("now", p.lease())
				}()
			case wire.StatusOnline, wire.StatusOffline:
				go func() {
					ctx, cancel := context.WithTimeout(context.Background(), statusWait)
					defer cancel()
					if cl.WaitStatus(ctx, line) == nil {
						write(logLine{Ev: "status", T: now(), Status: line})
					}
				}()
			}
		}
		close(stop) // EOF: the harness says stop
	}()
	for {
		select {
		case <-stop:
			return nil
		default:
		}
		send(p.next())
		time.Sleep(time.Duration(p.intN(3)) * time.Millisecond)
	}
}

// planner chooses a controller's commands: mostly fresh ones under its
// current lease, sometimes a new lease (a fence-only command first),
// sometimes a command under one of its older tokens (stale unless nobody
// has moved that scope's fence since), sometimes one of its earlier
// commands again, unchanged (a duplicate).
type planner struct {
	mu     sync.Mutex // its methods are called from concurrent sends
	idx    int
	rng    *rand.Rand
	token  uint64
	tokens []uint64          // every token it held, oldest first
	seq    map[uint64]uint64 // the next seq of each token
	recent []command         // its last commands, for duplicates
	ops    int
}

func newPlanner(idx int, seed uint64) *planner {
	return &planner{idx: idx, rng: rand.New(rand.NewPCG(seed, uint64(idx))), seq: map[uint64]uint64{}}
}

// newToken is a lease grant's token: the monotonic clock in microseconds,
// times 16, plus the controller's index, so that every controller's tokens
// differ and later grants get higher ones, as from a lease service.
func (p *planner) newToken() uint64 {
	t := uint64(now()/1000)*16 + uint64(p.idx)
	if len(p.tokens) > 0 && t <= p.token {
		t = p.token + 16
	}
	p.token = t
	p.tokens = append(p.tokens, t)
	return t
}

// lease is a new lease's fence-only command.
func (p *planner) lease() command {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ops++
	return p.command(actuators[p.rng.IntN(len(actuators))], p.newToken(), "")
}

func (p *planner) intN(n int) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.rng.IntN(n)
}

func (p *planner) next() (kind string, c command) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ops++
	a := actuators[p.rng.IntN(len(actuators))]
	state := []string{"on", "off"}[p.rng.IntN(2)]
	if p.rng.IntN(20) == 0 {
		state = "" // fence-only
	}
	r := p.rng.IntN(100)
	switch {
	case p.token == 0 || r < 10:
		kind, state = "lease", ""
		p.newToken()
	case r < 25 && len(p.tokens) > 1:
		kind = "stale"
		old := p.tokens[p.rng.IntN(len(p.tokens)-1)]
		return kind, p.command(a, old, state)
	case r < 35 && len(p.recent) > 0:
		return "duplicate", p.recent[p.rng.IntN(len(p.recent))]
	default:
		kind = "fresh"
	}
	return kind, p.command(a, p.token, state)
}

func (p *planner) command(a actuator, token uint64, state string) command {
	seq := p.seq[token]
	p.seq[token] = seq + 1
	return command{ID: fmt.Sprintf("c%d-%d", p.idx, p.ops), Actuator: a.name, Scope: a.scope, Pair: pair{token, seq}, State: state}
}

// sent remembers c for later duplicates.
func (p *planner) sent(c command) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.recent = append(p.recent, c)
	if len(p.recent) > 50 {
		p.recent = p.recent[1:]
	}
}
