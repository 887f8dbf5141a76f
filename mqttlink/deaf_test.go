package mqttlink

import (
	"strings"
	"testing"
	"time"

	"github.com/fencegate/fencegate/tests/testenv"
	"github.com/fencegate/fencegate/wire"
)

// TestDeafConnectionRedialed: on a connection that does not deliver the
// gateway's own claim back (here an ACL that lets it write its instance
// topic but not read it; mochi-mqtt leaves such a connection when two
// clients with one client id take the session over at once), no command
// can come either: the link drops it and connects anew, says why, and
// takes commands once the broker delivers again.
func TestDeafConnectionRedialed(t *testing.T) {
	defer func(d time.Duration) { claimEchoWait = d }(claimEchoWait)
	claimEchoWait = 300 * time.Millisecond
	id := testenv.ID(t, "deaf")
	topics := wire.Topics{GatewayID: id}
	acl := func(instance string) string {
		return "user gw\ntopic readwrite " + topics.SetFilter() + "\n" + "topic " + instance + " " + topics.Instance() + "\n" +
			"topic write " + topics.Status() + "\n"
	}
	b := testenv.MosquittoAuth(t, map[string]string{"gw": "pw"}, acl("write"))
	l, ready := runLink(t, Options{Broker: b.URL, Username: "gw", Password: "pw", Topics: topics, Actuators: []string{"pump"}, Store: "s"}, &countHandler{})
	deadline := time.Now().Add(10 * time.Second)
	for st := l.Status(); st.Connects < 3; st = l.Status() {
		if time.Now().After(deadline) {
			t.Fatalf("the link stays on a connection that delivers nothing: %+v", st)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if st := l.Status(); st.Subscribed || !strings.Contains(st.LastError, "own claim on "+topics.Instance()+" did not come back") {
		t.Errorf("status on a deaf connection = %+v; want not taking commands, and why", st)
	}
	b.WriteACL(t, acl("readwrite"))
	b.Reload(t)
	select {
	case <-ready:
	case <-time.After(20 * time.Second):
		t.Fatalf("the link did not take commands once the broker delivered its claim: %+v", l.Status())
	}
}
