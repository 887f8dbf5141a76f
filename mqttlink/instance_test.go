package mqttlink

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"

	"github.com/fencegate/fencegate/tests/testenv"
	"github.com/fencegate/fencegate/wire"
)

// child starts a process that runs until it is killed, and returns it
// with the claim it would have made as the gateway of topics on this host
// with store. Its caller reaps it, or it is reaped when t ends.
func child(t *testing.T, topics wire.Topics, store string) (*exec.Cmd, wire.Claim) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("processes are known on Linux only")
	}
	cmd := exec.Command("sleep", "600")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	ticks, ok := processTicks(cmd.Process.Pid)
	if !ok {
		t.Fatal("no start for the child")
	}
	claim := New(Options{Topics: topics, Store: store}, &countHandler{}).claim
	claim.Instance, claim.PID, claim.Ticks, claim.Connection = "previous", cmd.Process.Pid, ticks, 1
	return cmd, claim
}

// retain publishes claim, retained, on the instance topic of topics.
func retain(t *testing.T, broker string, topics wire.Topics, claim wire.Claim) {
	t.Helper()
	c := mqtt.NewClient(mqtt.NewClientOptions().AddBroker(broker).SetClientID(testenv.ID(t, "previous")))
	if tok := c.Connect(); tok.Wait() && tok.Error() != nil {
		t.Fatal(tok.Error())
	}
	defer c.Disconnect(100)
	if tok := c.Publish(topics.Instance(), 1, true, wire.EncodeClaim(claim)); tok.Wait() && tok.Error() != nil {
		t.Fatal(tok.Error())
	}
}

// A gateway killed with kill -9 under a parent that does not reap it (a
// container without an init) stays a zombie: its pid exists, with the
// start the claim says. It has ended all the same; the next start with
// the same store takes over instead of refusing the id as in use.
func TestZombieIsNoRunningGateway(t *testing.T) {
	broker := testenv.EmbeddedBroker(t)
	topics := wire.Topics{GatewayID: testenv.ID(t, "zombie")}
	cmd, previous := child(t, topics, "store")
	cmd.Process.Signal(syscall.SIGKILL) // and not waited for
	for deadline := time.Now().Add(20 * time.Second); processStateOf(cmd.Process.Pid) != "Z"; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the killed child is in state %q, not a zombie", processStateOf(cmd.Process.Pid))
		}
	}
	l := New(Options{Topics: topics, Store: "store"}, &countHandler{})
	if got := l.guard.aliveness(previous); got != ended {
		t.Errorf("the claim of a zombie: aliveness %d, want ended (%d)", got, ended)
	}
	retain(t, broker, topics, previous)
	startLink(t, Options{Broker: broker, Topics: topics, Actuators: []string{"pump"}, Store: "store"}, &countHandler{})
}

// A process of this host that /proc says runs, with the pid and start of
// the claim left on the broker, but that does not answer: the guard cannot
// tell a gateway that serves from one on its way out. It does not stop
// with ErrConflict (exit 78, never restarted), nor take commands: it
// claims again until that process has ended, then takes commands.
func TestUnsureGuardWaits(t *testing.T) {
	defer func(d time.Duration) { settleTime = d }(settleTime)
	settleTime = 200 * time.Millisecond
	broker := testenv.EmbeddedBroker(t)
	topics := wire.Topics{GatewayID: testenv.ID(t, "unsure")}
	cmd, previous := child(t, topics, "store")
	retain(t, broker, topics, previous)

	ready := make(chan struct{}, 1)
	l := New(Options{Broker: broker, Topics: topics, Actuators: []string{"pump"}, Store: "store",
		Ready: func() { ready <- struct{}{} }}, &countHandler{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	defer func() { cancel(); <-done }()
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(l.Status().LastError, errUnsure.Error()); time.Sleep(5 * time.Millisecond) {
		select {
		case err := <-done:
			done <- err
			t.Fatalf("Run returned %v while the previous process runs without answering; want it to wait", err)
		case <-ready:
			t.Fatal("the link takes commands while the previous process runs")
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the link does not say it waits for the previous process within 20 s (status %+v)", l.Status())
		}
	}
	if l.Status().Subscribed {
		t.Fatal("the link says it takes commands while the previous process runs")
	}
	cmd.Process.Kill()
	cmd.Wait()
	select {
	case <-ready:
	case err := <-done:
		done <- err
		t.Fatalf("Run returned %v after the previous process ended; want it to take commands", err)
	case <-time.After(60 * time.Second):
		t.Fatalf("the link did not take commands within 60 s of the previous process's end (status %+v)", l.Status())
	}
}

// processStateOf returns the state letter of a process from /proc.
func processStateOf(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2 : i+3]
	}
	return ""
}

// retainedClaim returns the claim retained on the instance topic of
// topics, as a process subscribing now gets it.
func retainedClaim(t *testing.T, broker string, topics wire.Topics) wire.Claim {
	t.Helper()
	got := make(chan wire.Claim, 1)
	c := mqtt.NewClient(mqtt.NewClientOptions().AddBroker(broker).SetClientID(testenv.ID(t, "reader")))
	if tok := c.Connect(); tok.Wait() && tok.Error() != nil {
		t.Fatal(tok.Error())
	}
	defer c.Disconnect(100)
	tok := c.Subscribe(topics.Instance(), 1, func(_ mqtt.Client, m mqtt.Message) {
		if claim, err := wire.DecodeClaim(m.Payload()); err == nil && m.Retained() {
			select {
			case got <- claim:
			default:
			}
		}
	})
	if tok.Wait() && tok.Error() != nil {
		t.Fatal(tok.Error())
	}
	select {
	case claim := <-got:
		return claim
	case <-time.After(5 * time.Second): // a retained message follows the subscription's acknowledgement at once
		t.Fatalf("no claim retained on %s", topics.Instance())
		return wire.Claim{}
	}
}

// A process that found another serving its gateway id tells it before it
// stops, in a claim that names it, retained, even when its own connection
// is gone: the other process's takeover of the session (the same client
// id) is often how it found it. Here the link never connected at all. The
// claim is on the broker before the link is told to stop (onConflict):
// the process may end right after.
func TestConflictToldWithoutConnection(t *testing.T) {
	broker := testenv.EmbeddedBroker(t)
	topics := wire.Topics{GatewayID: testenv.ID(t, "tell")}
	l := New(Options{Broker: broker, Topics: topics, Store: "store"}, &countHandler{})
	other := wire.Claim{Instance: "other", Store: "other-store", Host: "elsewhere", PID: 1}
	var atStop wire.Claim
	l.guard.onConflict = func(error) { atStop = retainedClaim(t, broker, topics) }
	if err := l.guard.found(nil, other); !errors.Is(err, ErrConflict) {
		t.Fatalf("found: %v, want ErrConflict", err)
	}
	if atStop.Instance != l.claim.Instance || atStop.Conflict != other.Instance {
		t.Fatalf("retained claim when the link was told to stop: %+v; want this process's (%s) naming %q", atStop, l.claim.Instance, other.Instance)
	}
}

// The other process publishes its own claim right after it subscribes;
// one that reaches the broker just after the word replaces it there. The
// teller watches, and says it again: the claim retained in the end is
// the word.
func TestConflictSaidAgainOverTheOthersClaim(t *testing.T) {
	broker := testenv.EmbeddedBroker(t)
	topics := wire.Topics{GatewayID: testenv.ID(t, "again")}
	l := New(Options{Broker: broker, Topics: topics, Store: "store"}, &countHandler{})
	other := wire.Claim{Instance: "other", Store: "other-store", Host: "elsewhere", PID: 1, Connection: 1}
	testHookSaid = func() { retain(t, broker, topics, other) }
	t.Cleanup(func() { testHookSaid = nil })
	l.guard.found(nil, other)
	if got := retainedClaim(t, broker, topics); got.Instance != l.claim.Instance || got.Conflict != other.Instance {
		t.Fatalf("retained claim %+v; want this process's (%s) naming %q, said again over the other's", got, l.claim.Instance, other.Instance)
	}
}

// A gateway waits for the process of this host that served its id last
// and still runs; that process finds this one, says so in a claim it
// leaves retained, and ends. The live message is lost (QoS 0), so this
// one sees only the end: it must read the retained claim before it takes
// commands, find the conflict there, and stop, not take commands with its
// own store.
func TestConflictFoundAfterTheOtherEnded(t *testing.T) {
	// Restored after the link has stopped (cleanups run last first).
	t.Cleanup(func(d time.Duration) func() { return func() { settleTime, testHookLoseClaim = d, nil } }(settleTime))
	settleTime = time.Minute // the link waits in awaitLiving until the previous process ends
	testHookLoseClaim = func(m mqtt.Message) bool {
		c, err := wire.DecodeClaim(m.Payload())
		return err == nil && c.Conflict != "" && !m.Retained()
	}
	broker := testenv.EmbeddedBroker(t)
	topics := wire.Topics{GatewayID: testenv.ID(t, "told")}
	cmd, previous := child(t, topics, "store-a")
	retain(t, broker, topics, previous)

	r, ready := runLink(t, Options{Broker: broker, Topics: topics, Actuators: []string{"pump"}, Store: "store-b"}, &countHandler{})
	for deadline := time.Now().Add(20 * time.Second); retainedClaim(t, broker, topics).Instance != r.claim.Instance; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the link did not claim the id within 20 s (status %+v)", r.Status())
		}
	}
	told := previous
	told.Conflict = r.claim.Instance
	retain(t, broker, topics, told)
	cmd.Process.Kill()
	cmd.Wait()
	stopsWithConflict(t, r, ready, 30*time.Second, "it took the previous process's end for a clean stop, though that process had found it")
}

// stopsWithConflict waits up to within for the link r to stop with
// ErrConflict; taking commands (ready) instead fails t, saying why.
func stopsWithConflict(t *testing.T, r *testLink, ready <-chan struct{}, within time.Duration, why string) {
	t.Helper()
	select {
	case <-ready:
		t.Fatalf("the link takes commands: %s", why)
	case err := <-r.done:
		r.done <- err
		if !errors.Is(err, ErrConflict) {
			t.Fatalf("Run returned %v, want ErrConflict", err)
		}
	case <-time.After(within):
		t.Fatalf("the link neither stopped nor took commands within %v (status %+v)", within, r.Status())
	}
}

// A process of this host that served the id, runs, and does not answer
// is waited for; but one that claims the id again on a later connection
// while this one waits is no process on its way out: it serves, though
// its answers do not come (with one client id, the broker may leave the
// connection it took the session from open but deaf). The link stops
// with ErrConflict instead of waiting for it for ever, as that process
// would for this one.
func TestLivingThatClaimsAgainIsAConflict(t *testing.T) {
	t.Cleanup(func(d time.Duration) func() { return func() { settleTime, testHookLoseClaim = d, nil } }(settleTime))
	settleTime = 200 * time.Millisecond
	// Its live claims are lost: only the retained one, at each new
	// subscription, tells of it.
	testHookLoseClaim = func(m mqtt.Message) bool {
		c, err := wire.DecodeClaim(m.Payload())
		return err == nil && c.Instance == "previous" && !m.Retained()
	}
	broker := testenv.EmbeddedBroker(t)
	topics := wire.Topics{GatewayID: testenv.ID(t, "again")}
	_, previous := child(t, topics, "store-a")
	retain(t, broker, topics, previous)

	r, ready := runLink(t, Options{Broker: broker, Topics: topics, Actuators: []string{"pump"}, Store: "store-b"}, &countHandler{})
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(r.Status().LastError, errUnsure.Error()); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the link does not say it waits for the previous process within 20 s (status %+v)", r.Status())
		}
	}
	previous.Connection++
	retain(t, broker, topics, previous)
	// It claims again within its backoff, a few seconds here.
	stopsWithConflict(t, r, ready, 15*time.Second, "the previous process runs and claimed the id again")
}

// A claim of a process of this host that has ended, arriving after this
// process claimed the id, is an old retained claim handed back (a
// bridge's site broker replays the previous run's claim when the link
// comes back after a restart): no conflict. The link goes on serving and
// puts its own claim back on top.
func TestEndedClaimAfterOwnIsNoConflict(t *testing.T) {
	broker := testenv.EmbeddedBroker(t)
	topics := wire.Topics{GatewayID: testenv.ID(t, "replayed")}
	cmd, previous := child(t, topics, "store-a")
	cmd.Process.Kill()
	cmd.Wait()

	r, ready := runLink(t, Options{Broker: broker, Topics: topics, Actuators: []string{"pump"}, Store: "store-a"}, &countHandler{})
	select {
	case <-ready:
	case err := <-r.done:
		t.Fatalf("Run ended before taking commands: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatalf("the link did not take commands within 20 s (status %+v)", r.Status())
	}
	retain(t, broker, topics, previous)
	for deadline := time.Now().Add(20 * time.Second); retainedClaim(t, broker, topics).Instance != r.claim.Instance; time.Sleep(10 * time.Millisecond) {
		select {
		case err := <-r.done:
			t.Fatalf("the link stopped (%v) on the claim of a process that has ended", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the link did not put its own claim back within 20 s (status %+v)", r.Status())
		}
	}
	select {
	case err := <-r.done:
		t.Fatalf("the link stopped (%v) on the claim of a process that has ended", err)
	default:
	}
	if st := r.Status(); st.Conflict != "" {
		t.Fatalf("status says a conflict: %+v", st)
	}
}
