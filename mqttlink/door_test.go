package mqttlink

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"

	"github.com/fencegate/fencegate/actuator"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/tests/testctl"
	"github.com/fencegate/fencegate/tests/testenv"
	"github.com/fencegate/fencegate/wire"
)

// TestNoCommandAfterConflict: once the link has found
// another process serving its gateway id, not one more command reaches the
// core, however many were already waiting in its queue. Hooks force the
// interleaving: the first command is held just after its commit (with
// those queued behind it when its worker took it: they share the commit)
// while the rest wait behind it; the other process's claim arrives, and the link's
// stop is held back once the conflict is announced; then the first command
// is released. The next one must wait at the closed door rather than reach
// the core; only then may the link stop. Only the first commit's commands
// may have been applied.
func TestNoCommandAfterConflict(t *testing.T) {
	announced, stop := make(chan struct{}), make(chan struct{})
	parked := make(chan struct{}, 1)
	testHookConflict = func() { close(announced); <-stop }
	var queued atomic.Int64
	testHookQueued = func(string, []byte) { queued.Add(1) }
	testHookParked = func() {
		select {
		case parked <- struct{}{}:
		default:
		}
	}
	defer func() { testHookConflict, testHookParked, testHookQueued = nil, nil, nil }()
	broker := testenv.EmbeddedBroker(t)
	flog, sim := openStore(t)
	held, hold := make(chan struct{}), make(chan struct{})
	var first atomic.Bool
	var decided fence.Fence // the fence the first commit left: the first batch's commands, queued together
	bank, err := actuator.New(flog, []actuator.Spec{{Name: "pump", Scope: "pump", PinName: "GPIO17"}}, &actuator.Options{AfterCommit: func(fence.Command) {
		if first.CompareAndSwap(false, true) {
			if out, err := flog.Output("pump", "pump"); err == nil {
				decided = out.Fence
			}
			close(held)
			<-hold
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := bank.Start(sim.Pin); err != nil {
		t.Fatal(err)
	}
	topics := wire.Topics{GatewayID: testenv.ID(t, "door")}
	link := New(Options{Broker: broker, Topics: topics, Actuators: []string{"pump"}, Store: flog.ID()}, bank)
	done := make(chan error, 1)
	go func() { done <- link.Run(context.Background()) }()
	ctl := testctl.Connect(t, broker, topics)
	ctl.WaitStatus(t, wire.StatusOnline)
	const n = 60
	publish := func(i int) {
		ctl.Publish(t, "pump", wire.EncodeCommand(fence.Command{ID: fmt.Sprint("c-", i), Actuator: "pump",
			Fence: fence.Fence{Token: 1, Seq: uint64(i)}, State: fence.State(i%2 + 1)}), false)
	}
	publish(1)
	select {
	case <-held:
	case <-time.After(20 * time.Second):
		t.Fatal("the first command did not reach the core")
	}
	// The others queue behind the first, held in its commit.
	for i := 2; i <= n; i++ {
		publish(i)
	}
	for deadline := time.Now().Add(20 * time.Second); queued.Load() < n; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			close(hold)
			t.Fatalf("%d of %d commands queued", queued.Load(), n)
		}
	}
	other := mqtt.NewClient(mqtt.NewClientOptions().AddBroker(broker).SetClientID(testenv.ID(t, "other")))
	if tok := other.Connect(); tok.Wait() && tok.Error() != nil {
		t.Fatal(tok.Error())
	}
	defer other.Disconnect(100)
	claim := wire.Claim{Instance: "0th3r", Store: "another-store", Host: "another-host", PID: 1, Connection: 1}
	if tok := other.Publish(topics.Instance(), 1, true, wire.EncodeClaim(claim)); tok.Wait() && tok.Error() != nil {
		t.Fatal(tok.Error())
	}
	select {
	case <-announced:
	case <-time.After(20 * time.Second):
		close(hold)
		t.Fatal("the link did not see the other process's claim")
	}
	close(hold)
	// The pump's next command now either waits at the door or is decided.
	moved := func() bool {
		out, err := flog.Output("pump", "pump")
		return err == nil && decided.Less(out.Fence)
	}
	for deadline := time.Now().Add(20 * time.Second); len(parked) == 0 && !moved(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			close(stop)
			t.Fatal("the pump's next command neither waited at the door nor was decided")
		}
	}
	close(stop)
	select {
	case err := <-done:
		if !errors.Is(err, ErrConflict) {
			t.Errorf("Run returned %v, want ErrConflict", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return after the conflict")
	}
	out, err := flog.Output("pump", "pump")
	if err != nil {
		t.Fatal(err)
	}
	if decided.Token != 1 || out.Fence != decided {
		t.Errorf("after the conflict was found, the pump's fence moved on from %s (the first commit's) to %s: the commands that waited were applied", decided, out.Fence)
	}
}

// countHandler answers every command applied and counts them, and the
// distinct ids among them. It takes one command at a time (MaxBatch), as
// the bank does an interlocked output's, so that the link looks at its
// door between them.
type countHandler struct {
	n   atomic.Int64
	ids sync.Map
}

func (h *countHandler) HandleBatch(_ context.Context, cmds []fence.Command) ([]fence.Result, error) {
	res := make([]fence.Result, len(cmds))
	for i, c := range cmds {
		res[i] = h.apply(c)
	}
	return res, nil
}

func (h *countHandler) MaxBatch(string) int { return 1 }

// apply answers c applied, and counts it.
func (h *countHandler) apply(c fence.Command) fence.Result {
	h.n.Add(1)
	h.ids.Store(c.ID, true)
	return fence.Result{ID: c.ID, Actuator: c.Actuator, Outcome: fence.Applied}
}

func (h *countHandler) distinct() int {
	n := 0
	h.ids.Range(func(any, any) bool { n++; return true })
	return n
}

func (h *countHandler) Reject(c fence.Command, reason string, err error) fence.Result {
	return fence.Result{ID: c.ID, Actuator: c.Actuator, Outcome: fence.Rejected, Reason: reason, Error: err.Error()}
}

// queuedInSession makes the persistent session of a gateway that went
// down (its subscription, client id "fencegate-<id>") and publishes n
// commands for its actuator into it, seqs 1 to n.
func queuedInSession(t *testing.T, broker, name, actuator string, n int) (wire.Topics, string) {
	t.Helper()
	id := testenv.ID(t, name)
	topics := wire.Topics{GatewayID: id}
	clientID := "fencegate-" + id
	gw := mqtt.NewClient(mqtt.NewClientOptions().AddBroker(broker).SetClientID(clientID).SetCleanSession(false).SetProtocolVersion(4))
	if tok := gw.Connect(); tok.Wait() && tok.Error() != nil {
		t.Fatal(tok.Error())
	}
	if tok := gw.Subscribe(topics.SetFilter(), 1, nil); tok.Wait() && tok.Error() != nil {
		t.Fatal(tok.Error())
	}
	gw.Disconnect(100)
	ctl := testctl.Connect(t, broker, topics)
	for i := 1; i <= n; i++ {
		ctl.Publish(t, actuator, wire.EncodeCommand(fence.Command{ID: fmt.Sprint(i), Actuator: actuator,
			Fence: fence.Fence{Token: 1, Seq: uint64(i)}, State: fence.StateOn}), false)
	}
	return topics, clientID
}

// TestFullQueueDoesNotStall: more commands wait in the gateway's broker
// session (queued while it was down) than its backlog holds. They arrive
// before the claim the link waits for, on the same connection; the link
// must still read that claim and start taking commands, not wait for a
// backlog that only empties once it does. The commands it dropped come
// again, without any resend: once its backlog is empty the link
// reconnects to receive them (before, they waited for a reconnect that
// might never come, and their controllers for answers). A link that has
// dropped commands, and decided every one it queued, without closing its
// connection within refetchGrace fails at once, not at the deadline.
func TestFullQueueDoesNotStall(t *testing.T) {
	const n = 20
	// t.Cleanup, not defer: the subtests run in parallel, after this
	// function returns.
	was := backlogBytes
	t.Cleanup(func() { backlogBytes, testHookQueued = was, nil })
	backlogBytes = 6 * (msgOverhead + 150) // about 6 of these commands
	// Each subtest's link has an actuator of its own, named for its
	// broker, by which the hook counts the commands it queued.
	brokers := testenv.Brokers()
	queued := map[string]*atomic.Int64{}
	for bname := range brokers {
		queued[bname] = new(atomic.Int64)
	}
	testHookQueued = func(name string, _ []byte) {
		if q := queued[name]; q != nil {
			q.Add(1)
		}
	}
	for bname, start := range brokers {
		t.Run(bname, func(t *testing.T) {
			t.Parallel()
			broker := start(t)
			topics, clientID := queuedInSession(t, broker, "full", bname, n)
			h := &countHandler{}
			drops := &countLogs{prefix: "commands dropped", n: new(atomic.Int64)}
			ready := make(chan struct{}, 1)
			l := New(Options{Broker: broker, ClientID: clientID, Topics: topics, Actuators: []string{bname}, Store: "s", Logger: slog.New(drops),
				Ready: func() {
					select {
					case ready <- struct{}{}:
					default:
					}
				}}, h)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- l.Run(ctx) }()
			defer func() {
				cancel()
				select {
				case <-done:
				case <-time.After(10 * time.Second):
					t.Error("Run did not return 10 s after cancel")
				}
			}()
			select {
			case <-ready:
			case <-time.After(20 * time.Second):
				t.Fatalf("the link did not take commands within 20 s (%d handled; status %+v)", h.n.Load(), l.Status())
			}
			var idle time.Time // since when the link holds nothing but dropped commands, before it first reconnects
			for deadline := time.Now().Add(30 * time.Second); h.distinct() < n; time.Sleep(10 * time.Millisecond) {
				// Queued before decided: the worker decides them in order,
				// so equal counts mean every one queued was decided.
				q := queued[bname].Load()
				st := l.Status()
				if drops.n.Load() > 0 && h.n.Load() == q && st.Connects == 1 && st.Connected {
					if idle.IsZero() {
						idle = time.Now()
					} else if time.Since(idle) > refetchGrace {
						t.Fatalf("the link dropped commands, decided the %d it queued, and did not close its connection to receive the dropped ones again within %v (%d of %d handled; status %+v)",
							q, refetchGrace, h.distinct(), n, st)
					}
				} else {
					idle = time.Time{}
				}
				if time.Now().After(deadline) {
					t.Fatalf("%d of the %d commands queued in the session handled within 30 s (status %+v)", h.distinct(), n, l.Status())
				}
			}
			t.Logf("%d commands handled, %d decisions", h.distinct(), h.n.Load())
		})
	}
}

// refetchGrace bounds how long after its last command is decided a link
// whose backlog dropped commands may take to close its connection: it
// answers and acknowledges that command, then closes it at once.
const refetchGrace = 2 * time.Second

// countLogs is a log handler that counts the records whose message starts
// with prefix.
type countLogs struct {
	prefix string
	n      *atomic.Int64
}

func (c *countLogs) Enabled(context.Context, slog.Level) bool { return true }
func (c *countLogs) Handle(_ context.Context, r slog.Record) error {
	if strings.HasPrefix(r.Message, c.prefix) {
		c.n.Add(1)
	}
	return nil
}
func (c *countLogs) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *countLogs) WithGroup(string) slog.Handler      { return c }

// TestSessionCommandsProveDelivery: commands the broker delivers from the
// gateway's session as soon as it reconnects prove that it delivers
// commands, even when paho runs the connect handler only after them.
// Before, the handler forgot them, and the link sent a probe instead; a
// broker whose queue for the gateway was full dropped the probe, and with
// its window of unacknowledged commands full (nothing is acknowledged
// before the link takes commands) it sent nothing more: the gateway never
// came online (seen with Mosquitto's default max_queued_messages after a
// restart under load).
func TestSessionCommandsProveDelivery(t *testing.T) {
	// A window of 4 unacknowledged messages and a queue of 4 behind it:
	// the rest of the 20 commands, and the probe, are dropped.
	broker := testenv.MosquittoConf(t, "allow_anonymous true\npersistence false\nmax_inflight_messages 4\nmax_queued_messages 4\n")
	topics, clientID := queuedInSession(t, broker, "proof", "a", 20)
	// paho runs the connect handler after the session's commands are in.
	var queued atomic.Int32
	testHookQueued = func(string, []byte) { queued.Add(1) }
	testHookOnConnect = func() {
		for deadline := time.Now().Add(10 * time.Second); queued.Load() < 4 && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
	}
	defer func() { testHookQueued, testHookOnConnect = nil, nil }()
	// A probe is the contradiction: the broker drops it, and the link
	// waits in vain. Another client sees it at once.
	probed := make(chan string, 1)
	watch := mqtt.NewClient(mqtt.NewClientOptions().AddBroker(broker).SetClientID(testenv.ID(t, "watch")))
	if tok := watch.Connect(); tok.Wait() && tok.Error() != nil {
		t.Fatal(tok.Error())
	}
	defer watch.Disconnect(100)
	if tok := watch.Subscribe(topics.Probe(), 0, func(_ mqtt.Client, m mqtt.Message) {
		select {
		case probed <- string(m.Payload()):
		default:
		}
	}); tok.Wait() && tok.Error() != nil {
		t.Fatal(tok.Error())
	}
	h := &countHandler{}
	l, ready := runLink(t, Options{Broker: broker, ClientID: clientID, Topics: topics, Actuators: []string{"a"}, Store: "s"}, h)
	select {
	case <-ready:
	case p := <-probed:
		t.Fatalf("the link published a probe (%s) although %d commands came on its connection before the connect handler: they prove delivery, and the broker, its queue full, drops the probe (status %+v)",
			p, queued.Load(), l.Status())
	case <-time.After(20 * time.Second):
		t.Fatalf("the link did not take commands within 20 s (status %+v)", l.Status())
	}
	for deadline := time.Now().Add(20 * time.Second); h.distinct() < 4; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d commands handled within 20 s; status %+v", h.distinct(), l.Status())
		}
	}
	if queued.Load() < 4 {
		t.Fatalf("only %d commands were queued before the connect handler: the interleaving was not forced", queued.Load())
	}
}
