package service_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"

	"github.com/fencegate/fencegate/client"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/fencelog"
	"github.com/fencegate/fencegate/httpapi"
	"github.com/fencegate/fencegate/tests/testctl"
	"github.com/fencegate/fencegate/tests/testenv"
	"github.com/fencegate/fencegate/wire"
)

// securityDoc is the document whose acl_file TestBrokerACL runs.
const securityDoc = "../docs/security.md"

// aclMarker is the HTML comment in securityDoc right before the acl_file's
// code block.
const aclMarker = "<!-- acl_file:"

// docACL returns the acl_file of docs/security.md: the conf block after
// aclMarker.
func docACL(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(securityDoc)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), aclMarker)
	if !ok {
		t.Fatalf("%s has no %q comment: put it right before the acl_file's code block, which this test runs Mosquitto with", securityDoc, aclMarker)
	}
	_, rest, ok = strings.Cut(rest, "\n```conf\n")
	body, _, ok2 := strings.Cut(rest, "\n```\n")
	if !ok || !ok2 {
		t.Fatalf("%s: no ```conf block after the %q comment", securityDoc, aclMarker)
	}
	return body
}

// TestBrokerACL runs a real Mosquitto with exactly the
// acl_file of docs/security.md, with two gateways logging in with their ids
// and the controllers the file names: ctl-a for greenhouse-1, ctl-b for
// greenhouse-2. A gateway goes online and applies its controller's command;
// a controller's forged answer (on the shared topic, or on another
// controller's reply topic), state, status (published or as its last will)
// and instance claim reach nobody and change nothing; its command to the
// other gateway never reaches that gateway; and a controller subscribed to
// every reply topic hears none of another controller's answers.
func TestBrokerACL(t *testing.T) {
	acl := docACL(t)
	gw1, gw2 := fmt.Sprintf("acl1-%d", os.Getpid()), fmt.Sprintf("acl2-%d", os.Getpid())
	for doc, id := range map[string]string{"greenhouse-1": gw1, "greenhouse-2": gw2} {
		if !strings.Contains(acl, doc) {
			t.Fatalf("the acl_file of %s does not name gateway %q, which this test runs:\n%s", securityDoc, doc, acl)
		}
		acl = strings.ReplaceAll(acl, doc, id)
	}
	for _, u := range []string{"user ctl-a\n", "user ctl-b\n"} {
		if !strings.Contains(acl, u) {
			t.Fatalf("the acl_file of %s has no line %q, which this test logs in as:\n%s", securityDoc, strings.TrimSpace(u), acl)
		}
	}
	users := map[string]string{gw1: "pw-gw1", gw2: "pw-gw2", "ctl-a": "pw-a", "ctl-b": "pw-b"}
	b := testenv.MosquittoAuth(t, users, acl)

	// The gateways log in with their ids, as the file says.
	g1 := startConfig(t, gatewayConfig(t, gw1, b.URL, gw1, users[gw1]))
	g2 := startConfig(t, gatewayConfig(t, gw2, b.URL, gw2, users[gw2]))
	t1, t2 := g1.topics(), g2.topics()
	ctlA := testctl.ConnectAs(t, b.URL, t1, "ctl-a", users["ctl-a"])
	ctlB := testctl.ConnectAs(t, b.URL, t2, "ctl-b", users["ctl-b"])
	// What ctl-a may read of greenhouse-1, from before the first forgery.
	mine := t1.ReplyBase() + "ctl-a/"
	if reply := ctlA.ReplyTopic(); !strings.HasPrefix(reply, mine) {
		t.Fatalf("ctl-a's reply topic is %q, want one under %s (its user name), which the ACL lets it read", reply, mine)
	}
	seen := record(t, b.URL, "ctl-a", users["ctl-a"], mine+"#", t1.ResultFilter(), t1.StateFilter(), t1.Status())
	// What ctl-b hears of every reply topic: its own answers only,
	// however it asks.
	overheard := record(t, b.URL, "ctl-b", users["ctl-b"], "fencegate/+/reply/#", t1.ReplyFilter(), mine+"#", ctlA.ReplyTopic())

	t.Run("controller commands its gateway", func(t *testing.T) {
		ctlA.WaitStatus(t, wire.StatusOnline)
		expect(t, ctlA.Send(t, cmd("a-1", "pump", 10, 0, fence.StateOn)), fence.Applied, fence.Fence{Token: 10}, fence.StateOn)
		ctlA.State(t, "pump", func(o fence.Output) bool { return o.Fence.Token == 10 && o.State == fence.StateOn })
		ctx, cancel := context.WithTimeout(context.Background(), testctl.Timeout)
		defer cancel()
		if scope, err := ctlA.Scope(ctx, "pump"); err != nil || scope != "pump" {
			t.Errorf("scope of pump = %q, %v; want pump, read from the retained state", scope, err)
		}
	})

	t.Run("forged state", func(t *testing.T) {
		forged := fence.Output{Actuator: "pump", Scope: "pump", State: fence.StateOff, Fence: fence.Fence{Token: fence.MaxToken}, Holder: "forged"}
		publish(t, ctlA, t1.State("pump"), wire.EncodeState(forged), true)
		got, err := wire.DecodeState([]byte(retainedOn(t, b.URL, "ctl-a", users["ctl-a"], t1.State("pump"))))
		if err != nil || got.Holder == "forged" || got.Fence != (fence.Fence{Token: 10}) || got.State != fence.StateOn {
			t.Errorf("retained state of pump after ctl-a published a forged one = %+v, %v; want the gateway's: on, fence 10", got, err)
		}
	})

	t.Run("forged result", func(t *testing.T) {
		// An answer for the command ctl-a sends next, before the gateway's:
		// delivered, it would be the answer ctl-a takes.
		forged := fence.Result{ID: "a-2", Actuator: "pump", Outcome: fence.Applied, Command: fence.Fence{Token: 11},
			Fence: fence.Fence{Token: 11}, State: fence.StateOn, Error: "forged"}
		publish(t, ctlA, t1.Result("pump"), wire.EncodeResult(forged), false)
		res := ctlA.Send(t, cmd("a-2", "pump", 11, 0, fence.StateOff))
		if res.Error == "forged" {
			t.Fatalf("ctl-a took the answer it forged itself: %+v", res)
		}
		expect(t, res, fence.Applied, fence.Fence{Token: 11}, fence.StateOff)
	})

	t.Run("forged reply", func(t *testing.T) {
		// ctl-b answers, on ctl-a's own reply topic, the command ctl-a
		// sends next.
		forged := fence.Result{ID: "a-2b", Actuator: "pump", Outcome: fence.Stale, Command: fence.Fence{Token: 11, Seq: 1},
			Fence: fence.Fence{Token: fence.MaxToken}, State: fence.StateOff, Error: "forged"}
		publish(t, ctlB, ctlA.ReplyTopic(), wire.EncodeResult(forged), false)
		res := ctlA.Send(t, cmd("a-2b", "pump", 11, 1, fence.StateOn))
		if res.Error == "forged" {
			t.Fatalf("ctl-a took the answer ctl-b forged on its reply topic: %+v", res)
		}
		expect(t, res, fence.Applied, fence.Fence{Token: 11, Seq: 1}, fence.StateOn)
	})

	t.Run("forged status", func(t *testing.T) {
		publish(t, ctlA, t1.Status(), []byte(wire.StatusOffline), true)
		// And as a last will: a second connection with the same client id
		// ends the first, and the broker has decided on its will before it
		// accepts the second.
		id := fmt.Sprintf("acl-will-%d", os.Getpid())
		mqttConnect(t, b.URL, id, "ctl-a", users["ctl-a"], func(o *mqtt.ClientOptions) {
			o.SetWill(t1.Status(), wire.StatusOffline, 1, true)
		})
		mqttConnect(t, b.URL, id, "ctl-a", users["ctl-a"], nil)
		if got := retainedOn(t, b.URL, "ctl-a", users["ctl-a"], t1.Status()); got != wire.StatusOnline {
			t.Errorf("retained status after ctl-a published offline and left a will = %q, want %q", got, wire.StatusOnline)
		}
	})

	a3Answered := false
	t.Run("forged instance claim", func(t *testing.T) {
		// Delivered, another process's claim would make the gateway refuse
		// commands from then on.
		claim := wire.Claim{Instance: "forged", Store: "elsewhere", Host: "forged-host", PID: 1, Started: time.Now().UTC()}
		publish(t, ctlA, t1.Instance(), wire.EncodeClaim(claim), true)
		ctlA.Publish(t, "pump", wire.EncodeRequest(wire.Request{Command: cmd("a-3", "pump", 12, 0, fence.StateOn), Reply: ctlA.ReplyTopic()}), false)
		res, conflict := awaitUnlessConflict(t, ctlA, "a-3", g1)
		if conflict != "" {
			t.Fatalf("%s took the claim ctl-a forged for another process's and stopped taking commands: %s", gw1, conflict)
		}
		expect(t, res, fence.Applied, fence.Fence{Token: 12}, fence.StateOn)
		a3Answered = true
		if got := retainedOn(t, b.URL, gw1, users[gw1], t1.Instance()); strings.Contains(got, "forged") {
			t.Errorf("retained claim of %s = %s, the one ctl-a forged", gw1, got)
		}
		if st := apiStatus(t, g1.info.HTTP); st.Broker.Conflict != "" || !st.Broker.Subscribed {
			t.Errorf("status of %s = %+v, want taking commands, no conflict", gw1, st.Broker)
		}
	})

	t.Run("command to another gateway", func(t *testing.T) {
		// Token 2^63-1 would lock every real controller of greenhouse-2
		// out of the pump's scope for good.
		cross := fence.Command{ID: "cross-1", Actuator: "pump", Holder: "ctl-a", Fence: fence.Fence{Token: fence.MaxToken}, State: fence.StateOn}
		publish(t, ctlA, t2.Set("pump"), wire.EncodeCommand(cross), false)
		// The gateway decides one actuator's commands in arrival order:
		// had ctl-a's come through, ctl-b's would be stale.
		expect(t, ctlB.Send(t, cmd("b-1", "pump", 5, 0, fence.StateOn)), fence.Applied, fence.Fence{Token: 5}, fence.StateOn)
		if a := g2.api(t)["pump"]; a.Fence != (fence.Fence{Token: 5}) {
			t.Errorf("fence of %s's pump = %v, want 5/0", gw2, a.Fence)
		}
		for _, e := range audit(t, g2.info.HTTP) {
			if e.ID == "cross-1" {
				t.Errorf("%s decided ctl-a's command: %+v", gw2, e)
			}
		}
	})

	// Everything forged came before a-3's answer and state, on the same
	// topics, to the same subscriber; ctl-a's recorder heard its answers on
	// its reply topic, on which ctl-b's heard none of them. Without that
	// answer (a failure above) the recorder holds what it holds.
	if a3Answered {
		waitFor(t, testctl.Timeout, "ctl-a's recorder to see a-3's answer and state", func() bool {
			return seen.has(ctlA.ReplyTopic(), `"id":"a-3"`) && seen.has(t1.State("pump"), `"token":12`)
		})
	}
	for _, m := range seen.all() {
		if strings.Contains(m, "forged") || m == t1.Status()+" "+wire.StatusOffline {
			t.Errorf("a subscriber with read rights received what was forged: %s", m)
		}
	}
	for _, m := range overheard.all() {
		if topic, _, _ := strings.Cut(m, " "); !strings.HasPrefix(topic, t2.ReplyBase()+"ctl-b/") {
			t.Errorf("ctl-b, subscribed to every reply topic, heard an answer it did not ask for: %s", m)
		}
	}
}

// awaitUnlessConflict waits for the answer to command id, unless gateway
// g says first that another process serves its id (it then answers no
// command, and stops): it returns what it said instead.
func awaitUnlessConflict(t *testing.T, ctl *testctl.Controller, id string, g *gateway) (fence.Result, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testctl.Timeout)
	defer cancel()
	conflict := make(chan string, 1)
	go func() {
		defer cancel()
		for {
			var st httpapi.Status
			if err := httpapi.GetJSON(ctx, "http://"+g.info.HTTP+"/api/status", &st); err == nil && st.Broker.Conflict != "" {
				conflict <- st.Broker.Conflict
				return
			}
			select {
			case <-g.ended:
				conflict <- "the gateway stopped"
				return
			case <-ctx.Done():
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	res, err := ctl.Await(ctx, id)
	select {
	case c := <-conflict:
		return res, c
	default:
	}
	if res.Outcome == "" {
		t.Fatalf("no answer for id %q within %v: %v", id, testctl.Timeout, err)
	}
	return res, ""
}

// publish publishes payload on topic as ctl and waits for the broker's
// acknowledgement: the broker has then routed it, or dropped it.
func publish(t *testing.T, ctl *testctl.Controller, topic string, payload []byte, retained bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testctl.Timeout)
	defer cancel()
	if err := ctl.Client.Publish(ctx, topic, payload, retained); err != nil {
		t.Fatalf("publish on %s: %v", topic, err)
	}
}

// mqttConnect connects a plain MQTT client (no automatic reconnect), with
// opts applied to its options; it disconnects when t ends.
func mqttConnect(t *testing.T, broker, clientID, user, password string, opts func(*mqtt.ClientOptions)) mqtt.Client {
	t.Helper()
	o := mqtt.NewClientOptions().AddBroker(broker).SetClientID(clientID).SetUsername(user).SetPassword(password).
		SetCleanSession(true).SetAutoReconnect(false).SetConnectTimeout(5 * time.Second)
	if opts != nil {
		opts(o)
	}
	c := mqtt.NewClient(o)
	if tok := c.Connect(); !tok.WaitTimeout(testctl.Timeout) || tok.Error() != nil {
		t.Fatalf("connect to %s as %s: %v", broker, user, tok.Error())
	}
	t.Cleanup(func() { c.Disconnect(100) })
	return c
}

var clientN atomic.Int64

// newClientID returns a client id unique in this process.
func newClientID(what string) string {
	return fmt.Sprintf("%s-%d-%d", what, os.Getpid(), clientN.Add(1))
}

// retainedOn returns the message retained on topic, read by a new
// subscription as user.
func retainedOn(t *testing.T, broker, user, password, topic string) string {
	t.Helper()
	c := mqttConnect(t, broker, newClientID("retained"), user, password, nil)
	defer c.Disconnect(100)
	got := make(chan string, 1)
	tok := c.Subscribe(topic, 1, func(_ mqtt.Client, m mqtt.Message) {
		select {
		case got <- string(m.Payload()):
		default:
		}
	})
	if !tok.WaitTimeout(testctl.Timeout) || tok.Error() != nil {
		t.Fatalf("subscribe to %s as %s: %v", topic, user, tok.Error())
	}
	select {
	case s := <-got:
		return s
	case <-time.After(testctl.Timeout):
		t.Fatalf("no retained message on %s for %s within %v", topic, user, testctl.Timeout)
	}
	return ""
}

// recorder keeps every message its subscriptions deliver, as "topic payload".
type recorder struct {
	mu   sync.Mutex
	msgs []string
}

// record subscribes to filters as user and records what arrives until t
// ends.
func record(t *testing.T, broker, user, password string, filters ...string) *recorder {
	t.Helper()
	r := &recorder{}
	c := mqttConnect(t, broker, newClientID("recorder"), user, password, nil)
	subs := map[string]byte{}
	for _, f := range filters {
		subs[f] = 1
	}
	tok := c.SubscribeMultiple(subs, func(_ mqtt.Client, m mqtt.Message) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.msgs = append(r.msgs, m.Topic()+" "+string(m.Payload()))
	})
	if !tok.WaitTimeout(testctl.Timeout) || tok.Error() != nil {
		t.Fatalf("subscribe to %v as %s: %v", filters, user, tok.Error())
	}
	return r
}

// has reports whether a message on topic containing text arrived.
func (r *recorder) has(topic, text string) bool {
	for _, m := range r.all() {
		if p, ok := strings.CutPrefix(m, topic+" "); ok && strings.Contains(p, text) {
			return true
		}
	}
	return false
}

func (r *recorder) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.msgs...)
}

// audit returns the gateway's audit trail through its HTTP API.
func audit(t *testing.T, addr string) []fencelog.Entry {
	t.Helper()
	var es []fencelog.Entry
	getJSON(t, addr, "/api/audit?n=10000", &es)
	return es
}

// TestSingleGatewayACL runs a real Mosquitto with the one-gateway ACL of
// docs/raspberry-pi-os.md (docs/protocol.md has the same): the gateway logs
// in as gateway, a controller as controller, and the controller's
// commands are answered on its reply topic, both as package client sends
// them and as the tests' controller does.
func TestSingleGatewayACL(t *testing.T) {
	acl := singleGatewayACL(t, "../docs/raspberry-pi-os.md", "sudo tee /etc/mosquitto/acl <<'EOF'\n", "\nEOF\n")
	if same := singleGatewayACL(t, "../docs/protocol.md", "```conf\nuser gateway\n", "\n```\n"); "user gateway\n"+same != acl {
		t.Fatalf("docs/protocol.md's ACL differs from docs/raspberry-pi-os.md's:\n%s\n---\n%s", same, acl)
	}
	id := testenv.ID(t, "acl")
	users := map[string]string{"gateway": "pw-gw", "controller": "pw-ctl"}
	b := testenv.MosquittoAuth(t, users, strings.ReplaceAll(acl, "greenhouse-1", id))
	g := startConfig(t, gatewayConfig(t, id, b.URL, "gateway", users["gateway"]))
	ctl := testctl.ConnectAs(t, b.URL, g.topics(), "controller", users["controller"])
	ctl.WaitStatus(t, wire.StatusOnline)
	expect(t, ctl.Send(t, cmd("c-1", "pump", 10, 0, fence.StateOn)), fence.Applied, fence.Fence{Token: 10}, fence.StateOn)
	ctx, cancel := context.WithTimeout(context.Background(), testctl.Timeout)
	defer cancel()
	if res, err := ctl.Client.Send(ctx, cmd("c-2", "pump", 11, 0, fence.StateOff)); err != nil || res.Outcome != fence.Applied {
		t.Fatalf("client.Send through the documented ACL = %+v, %v; want applied", res, err)
	}

	// An ACL written before reply topics drops every answer on its way to
	// the controller, without a word from the broker: Send says where to
	// look.
	old := strings.Replace(strings.ReplaceAll(acl, "fencegate/greenhouse-1/reply/controller/#", "fencegate/greenhouse-1/+/result"), "topic write fencegate/greenhouse-1/reply/#\n", "", 1)
	if old == acl {
		t.Fatal("could not remove the reply lines from the ACL")
	}
	id2 := testenv.ID(t, "acl-old")
	b2 := testenv.MosquittoAuth(t, users, strings.ReplaceAll(old, "greenhouse-1", id2))
	g2 := startConfig(t, gatewayConfig(t, id2, b2.URL, "gateway", users["gateway"]))
	ctl2 := testctl.ConnectAs(t, b2.URL, g2.topics(), "controller", users["controller"])
	ctl2.WaitStatus(t, wire.StatusOnline)
	short, cancel2 := context.WithTimeout(ctx, 2*time.Second)
	defer cancel2()
	_, err := ctl2.Client.Send(short, cmd("c-3", "pump", 12, 0, fence.StateOn))
	if !errors.Is(err, client.ErrTimeout) || !strings.Contains(err.Error(), "must let the gateway write fencegate/"+id2+"/reply/# and this controller read its reply topic") {
		t.Errorf("Send through an ACL without reply topics = %v; want ErrTimeout that points at the ACL", err)
	}
}

// singleGatewayACL returns the text of doc (relative to this package)
// between the first begin and the end after it.
func singleGatewayACL(t *testing.T, doc, begin, end string) string {
	t.Helper()
	b, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), begin)
	body, _, ok2 := strings.Cut(rest, end)
	if !ok || !ok2 {
		t.Fatalf("%s: no ACL between %q and %q", doc, begin, end)
	}
	return body
}
