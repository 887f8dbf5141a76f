// Package scenario plays fencegate's stories against a running simulator
// (package sim), over MQTT with simulated controllers and a simulated
// lease service, and judges the gateway's behaviour: a paused controller
// (on a switch and on a set-point), a duplicate delivery, a crash between
// fsync and drive, a vanished controller, a pulse cut by a crash, and the
// paused-controller story against an unfenced twin.
//
// It talks to the simulator only through its HTTP API (GET /api/sim, the
// gateway's API behind it) and the broker, so the same player runs from
// the dashboard (in the simulator's process) and from
// `gateway sim scenario NAME` (in another process).
package scenario

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/fencegate/fencegate/client"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/httpapi"
	"github.com/fencegate/fencegate/wire"
)

// Info names and describes a scenario.
type Info struct {
	Name        string `json:"name"`
	Title       string `json:"title"`
	Description string `json:"description"`
}

// Verdict is a scenario's result.
type Verdict struct {
	Pass bool   `json:"pass"`
	Text string `json:"text"`
}

// Env is where a scenario plays: a running simulator.
type Env struct {
	// SimURL is the simulator's dashboard URL, e.g. http://127.0.0.1:8080.
	SimURL string
	// Delay is the pause between steps, so that people can follow them
	// on the dashboard; zero plays at full speed.
	Delay time.Duration
	// Out, if set, receives every step and the verdict as text.
	Out io.Writer
}

type scenario struct {
	info Info
	run  func(ctx context.Context, r *run) Verdict
}

var scenarioOrder = []scenario{
	{Info{"paused-controller", "Paused controller",
		"A gets token N and pauses; B gets N+1 and switches the pump off; A wakes and sends its old command: stale."}, pausedController},
	{Info{"duplicate-delivery", "Duplicate delivery",
		"A QoS 1 redelivery of an applied command is answered duplicate and driven once."}, duplicateDelivery},
	{Info{"crash-and-reconcile", "Crash and reconcile",
		"The gateway is killed between its fsync and the drive; after the restart the output is reconciled to the record."}, crashAndReconcile},
	{Info{"controller-vanishes", "Controller vanishes",
		"A holds the sprinkler's lease and sends heartbeats, then dies; the scope's dead-man sends the sprinkler off without moving the fence; B takes over at once, and A's late command is stale."}, controllerVanishes},
	{Info{"pulse-crash", "Pulse and crash",
		"A door strike's pulse is running when the gateway is killed; after the restart the door is at rest, the pulse is recorded interrupted, and its redelivery opens nothing."}, pulseCrash},
	{Info{"paused-dimmer", "Paused controller, dimmer",
		"The paused controller story on a set point, the dimmer (a Modbus register): B sets 20 %; A wakes and sends its old 80 %: stale, and the register keeps B's value."}, pausedDimmer},
	{Info{"unfenced", "Unfenced (simulation only)",
		"The paused-controller story against the fenced pump and an unfenced twin side by side: the stale write wins only on the twin."}, unfenced},
}

var scenarios = func() map[string]scenario {
	m := map[string]scenario{}
	for _, s := range scenarioOrder {
		m[s.info.Name] = s
	}
	return m
}()

// Infos describes every scenario, in order.
func Infos() []Info {
	out := make([]Info, 0, len(scenarioOrder))
	for _, s := range scenarioOrder {
		out = append(out, s.info)
	}
	return out
}

// Names lists the scenarios in their order.
func Names() []string {
	var names []string
	for _, s := range scenarioOrder {
		names = append(names, s.info.Name)
	}
	return names
}

// ErrUnknown is returned by Run for a name it does not know.
var ErrUnknown = errors.New("scenario: unknown scenario")

// Sim is what a player reads of a running simulator (GET /api/sim): where
// its gateway is, the unfenced twins, and how the gateway process last
// ended.
type Sim struct {
	GatewayID string `json:"gateway_id"`
	Prefix    string `json:"prefix"`
	Broker    string `json:"broker"`
	Twins     []Twin `json:"twins"`
	LastExit  *Exit  `json:"last_exit,omitempty"`
	Modbus    Modbus `json:"modbus"`
}

// Modbus is what a player reads of the simulator's Modbus module: its
// set-point registers' values and full scales, by actuator.
type Modbus struct {
	Registers map[string]uint16 `json:"registers"`
	Full      map[string]int    `json:"full"`
}

// Twin is the state of an unfenced twin output.
type Twin struct {
	Name   string `json:"name"`
	Level  string `json:"level"` // high or low
	Holder string `json:"holder,omitempty"`
	Token  uint64 `json:"token,omitempty"`
}

// Exit describes how the simulator's gateway process last ended, with the
// latch levels read right after, before the restart reconciles them.
type Exit struct {
	At     time.Time       `json:"at"`
	Reason string          `json:"reason"`
	Latch  map[string]bool `json:"latch"`
}

// TwinTopic is the command topic of an unfenced twin. It is outside the
// gateway's topics on purpose: no gateway ever subscribes to it.
func TwinTopic(gatewayID, name string) string {
	return "fencegate-sim/" + gatewayID + "/unfenced/" + name + "/set"
}

// NarrationTopic carries a playing scenario's steps to the simulator's
// dashboard.
func NarrationTopic(gatewayID string) string { return "fencegate-sim/" + gatewayID + "/scenario" }

// Narration is one message on NarrationTopic: an event for the
// dashboard's stream ("start", "step" or "verdict") and its data.
type Narration struct {
	Event string          `json:"event"`
	Data  json.RawMessage `json:"data"`
}

// FetchSim reads a running simulator's description (GET /api/sim).
func FetchSim(ctx context.Context, simURL string) (Sim, error) {
	var info Sim
	err := httpapi.GetJSON(ctx, simURL+"/api/sim", &info)
	return info, err
}

// Run plays a scenario against the simulator at env.SimURL, over
// MQTT with simulated controllers, and reports each step to env.Out and to
// the simulator's dashboard. The error is for failures to play at all; a
// scenario that played and found the gateway wrong returns a failing
// Verdict.
func Run(ctx context.Context, name string, env Env) (Verdict, error) {
	sc, ok := scenarios[name]
	if !ok {
		return Verdict{}, fmt.Errorf("%w %q (scenarios: %s)", ErrUnknown, name, strings.Join(Names(), ", "))
	}
	info, err := FetchSim(ctx, env.SimURL)
	if err != nil {
		return Verdict{}, fmt.Errorf("scenario: no simulator at %s: %w", env.SimURL, err)
	}
	ctl, err := client.Dial(ctx, client.Options{Broker: info.Broker, Prefix: info.Prefix, GatewayID: info.GatewayID})
	if err != nil {
		return Verdict{}, err
	}
	defer ctl.Close()
	r := &run{env: env, info: info, ctl: ctl, name: name}
	r.event("start", map[string]string{"scenario": name})
	if env.Out != nil {
		fmt.Fprintf(env.Out, "scenario %s: %s\n", name, sc.info.Description)
	}
	v := sc.run(ctx, r)
	if ctx.Err() != nil && v.Pass {
		v = Verdict{false, "interrupted: " + ctx.Err().Error()}
	}
	r.event("verdict", map[string]any{"scenario": name, "pass": v.Pass, "text": v.Text})
	if env.Out != nil {
		word := "PASS"
		if !v.Pass {
			word = "FAIL"
		}
		fmt.Fprintf(env.Out, "%s %s: %s\n", word, name, v.Text)
	}
	return v, nil
}

// run is one playing of a scenario.
type run struct {
	env  Env
	info Sim
	ctl  *client.Client
	name string
	step int
}

func (r *run) event(name string, data any) {
	b, _ := json.Marshal(data)
	msg, _ := json.Marshal(Narration{Event: name, Data: b})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	r.ctl.Publish(ctx, NarrationTopic(r.info.GatewayID), msg, false)
}

// say reports a step. kind is controller, gateway, check, bad or info.
func (r *run) say(kind, format string, a ...any) {
	r.step++
	text := fmt.Sprintf(format, a...)
	if r.env.Out != nil {
		fmt.Fprintf(r.env.Out, "%2d. %s\n", r.step, text)
	}
	r.event("step", map[string]string{"scenario": r.name, "kind": kind, "text": text})
}

func (r *run) pause(ctx context.Context) {
	if r.env.Delay <= 0 {
		return
	}
	select {
	case <-time.After(r.env.Delay):
	case <-ctx.Done():
	}
}

func (r *run) fail(format string, a ...any) Verdict {
	text := fmt.Sprintf(format, a...)
	r.say("bad", "%s", text)
	return Verdict{false, text}
}

// actuator reads an actuator through the gateway's API (via the simulator).
func (r *run) actuator(ctx context.Context, name string) (httpapi.Actuator, error) {
	var list []httpapi.Actuator
	if err := httpapi.GetJSON(ctx, r.env.SimURL+"/api/actuators", &list); err != nil {
		return httpapi.Actuator{}, err
	}
	for _, a := range list {
		if a.Name == name {
			return a, nil
		}
	}
	return httpapi.Actuator{}, fmt.Errorf("no actuator %q", name)
}

// poll runs try every 50 ms, for 10 s at most, until it says it is done;
// then its error, or at the end the last one it gave (ctx's if none).
func poll(ctx context.Context, try func(ctx context.Context) (done bool, err error)) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for {
		done, err := try(ctx)
		if done {
			return err
		}
		select {
		case <-ctx.Done():
			if err == nil {
				err = ctx.Err()
			}
			return err
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// waitLevel waits until the pin of actuator reads back as on (high) or off.
func (r *run) waitLevel(ctx context.Context, name string, on bool) (httpapi.Actuator, error) {
	want := map[bool]string{true: "high", false: "low"}[on]
	var a httpapi.Actuator
	err := poll(ctx, func(ctx context.Context) (bool, error) {
		var err error
		if a, err = r.actuator(ctx, name); err != nil {
			return false, err
		}
		if a.Level == want {
			return true, nil
		}
		return false, fmt.Errorf("%s reads %s, want %s", name, a.Level, want)
	})
	return a, err
}

// lease is the scenario's stand-in for a lease service: it grants strictly
// increasing tokens, starting above the scope's current fence.
type lease struct{ next uint64 }

func (r *run) newLease(ctx context.Context, actuator string) (*lease, error) {
	a, err := r.actuator(ctx, actuator)
	if err != nil {
		return nil, err
	}
	return &lease{next: a.Fence.Token + 1}, nil
}

func (l *lease) grant() uint64 { t := l.next; l.next++; return t }

// send sends c and returns the gateway's answer, whatever its outcome; the
// error is for when there was none.
func (r *run) send(ctx context.Context, c fence.Command) (fence.Result, error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	return answer(r.ctl.Send(ctx, c))
}

func answer(res fence.Result, err error) (fence.Result, error) {
	if res.Outcome != "" {
		return res, nil // every answer, stale ones included, is a result here
	}
	return res, err
}

func cmd(holder, actuator string, token, seq uint64, s fence.State) fence.Command {
	return fence.Command{Holder: holder, Actuator: actuator, Fence: fence.Fence{Token: token, Seq: seq}, State: s}
}

// story plays the paused-controller story; twin, if set, also receives
// every command without a fence.
func story(ctx context.Context, r *run, twin bool) Verdict {
	const act = "pump"
	l, err := r.newLease(ctx, act)
	if err != nil {
		return r.fail("cannot read the pump: %v", err)
	}
	send := func(c fence.Command) (fence.Result, error) {
		if twin {
			tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			if err := r.ctl.Publish(tctx, TwinTopic(r.info.GatewayID, act), wire.EncodeCommand(c), false); err != nil {
				return fence.Result{}, err
			}
		}
		return r.send(ctx, c)
	}
	t0 := l.grant()
	r.say("controller", "Setup: controller-0 holds token %d and switches the pump on.", t0)
	if res, err := send(cmd("controller-0", act, t0, 0, fence.StateOn)); err != nil || res.Outcome != fence.Applied {
		return r.fail("setup command: %v %s %s", err, res.Outcome, res.Error)
	}
	r.pause(ctx)
	tA, tB := r.handOver(ctx, l, `"pump on"`)
	r.say("controller", "B publishes \"pump off\" with token %d.", tB)
	res, err := send(cmd("controller-b", act, tB, 0, fence.StateOff))
	if err != nil || res.Outcome != fence.Applied {
		return r.fail("B's command: %v %s %s", err, res.Outcome, res.Error)
	}
	r.say("gateway", "Gateway: applied. Fence %s recorded and fsynced, then the pump was switched off.", res.Fence)
	if _, err := r.waitLevel(ctx, act, false); err != nil {
		return r.fail("the pump did not switch off: %v", err)
	}
	if twin {
		r.say("info", "The unfenced twin switched off too.")
	}
	r.pause(ctx)
	r.say("controller", "A wakes up, still believing it holds the lease, and publishes \"pump on\" with token %d.", tA)
	res, err = send(cmd("controller-a", act, tA, 0, fence.StateOn))
	if err != nil {
		return r.fail("A's command: %v", err)
	}
	if res.Outcome != fence.Stale {
		return r.fail("A's command was answered %s, want stale: the gateway let an old token through", res.Outcome)
	}
	r.say("gateway", "Gateway: stale. %s", res.Error)
	r.pause(ctx)
	r.say("controller", "A rereads the state from the answer: the pump is %s at fence %s. A stands down.", res.State, res.Fence)
	r.pause(ctx)
	a, err := r.waitLevel(ctx, act, false)
	if err != nil {
		return r.fail("the fenced pump is on: A's stale write won (%v)", err)
	}
	r.say("check", "The fenced pump reads back %s, as B set it (fence %s, holder %s).", a.Level, a.Fence, a.Holder)
	if !twin {
		return Verdict{true, fmt.Sprintf("A's stale command (token %d) was refused; the pump stayed off as B (token %d) set it.", tA, tB)}
	}
	tw, err := r.waitTwin(ctx, act, "controller-a")
	if err != nil {
		return r.fail("the unfenced twin did not take A's write: %v", err)
	}
	r.say("check", "The unfenced twin is %s: without a fence, A's stale write won.", map[string]string{"high": "on", "low": "off"}[tw.Level])
	if tw.Level != "high" {
		return r.fail("the unfenced twin is off; the demonstration did not show the stale write winning")
	}
	return Verdict{true, fmt.Sprintf("fenced pump: off (A's token %d refused); unfenced twin: on (A's stale write won).", tA)}
}

// handOver narrates the heart of the paused-controller story: A is
// granted a token and prepares what, then pauses; its lease expires, and
// B is granted the next token.
func (r *run) handOver(ctx context.Context, l *lease, what string) (tA, tB uint64) {
	tA = l.grant()
	r.say("controller", "The lease service grants controller A token %d. A prepares %s…", tA, what)
	r.pause(ctx)
	r.say("controller", "…and pauses before publishing it (a GC stop, a partition, a slow network).")
	r.pause(ctx)
	tB = l.grant()
	r.say("info", "A's lease expires. The lease service grants controller B token %d.", tB)
	r.pause(ctx)
	return tA, tB
}

func (r *run) waitTwin(ctx context.Context, name, holder string) (Twin, error) {
	var twin Twin
	err := poll(ctx, func(ctx context.Context) (bool, error) {
		info, err := FetchSim(ctx, r.env.SimURL)
		if err != nil {
			return false, err
		}
		for _, t := range info.Twins {
			if t.Name == name && t.Holder == holder {
				twin = t
				return true, nil
			}
		}
		return false, fmt.Errorf("no twin %s written by %s", name, holder)
	})
	return twin, err
}
