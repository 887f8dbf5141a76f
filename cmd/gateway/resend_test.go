package main

import (
	"context"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/fencegate/fencegate/boards"
	"github.com/fencegate/fencegate/client"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/fencelog"
	"github.com/fencegate/fencegate/tests/testctl"
	"github.com/fencegate/fencegate/tests/testenv"
	"github.com/fencegate/fencegate/wire"
)

// TestResendAfterSessionLost: the gateway crashes after it recorded a
// command and before it drove or answered it, and the broker then crashes
// too, losing the gateway's session and with it the command, which it
// will never deliver again. The controller's client resends the command
// (the same id and pair) once it is connected again: it is answered
// duplicate, and the output, driven to the recorded state by the
// restarted gateway, is not driven a second time (the sim board counts
// the drives).
func TestResendAfterSessionLost(t *testing.T) {
	m := testenv.MosquittoPersistent(t) // saves nothing unless stopped cleanly
	dir := t.TempDir()
	httpAddr := fmt.Sprintf("127.0.0.1:%d", testenv.Port(t))
	cfg := writeConfig(t, dir, m.URL, httpAddr)
	p := startProc(t, []string{"FENCEGATE_CRASH_AFTER_COMMIT=1"}, "run", "--config", cfg, "--init", "--log-level", "warn")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, client.Options{Broker: m.URL, GatewayID: gatewayID(t), Resend: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.WaitStatus(ctx, wire.StatusOnline); err != nil {
		t.Fatal(err)
	}

	cmd := fence.Command{ID: testenv.ID(t, "x"), Actuator: "pump", Fence: fence.Fence{Token: 7}, State: fence.StateOn, Holder: "ctl"}
	type answer struct {
		res fence.Result
		err error
	}
	answered := make(chan answer, 1)
	go func() {
		res, err := c.Send(ctx, cmd)
		answered <- answer{res, err}
	}()
	select {
	case <-p.done:
	case a := <-answered:
		t.Fatalf("answered %+v, %v before the crash:\n%s", a.res, a.err, p.output())
	case <-time.After(20 * time.Second):
		t.Fatalf("the gateway did not crash after its first commit:\n%s", p.output())
	}
	l, err := fencelog.Open(filepath.Join(dir, "fence.db"), &fencelog.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	out, err := l.Output("pump", "pump")
	l.Close()
	if err != nil || out.Fence != cmd.Fence || out.State != fence.StateOn {
		t.Fatalf("store after the crash: %+v, %v; want fence %s and on (recorded before the crash)", out, err, cmd.Fence)
	}
	if latch, _ := boards.ReadLatch(filepath.Join(dir, "fence.db.pins")); latch["GPIO17"] {
		t.Fatal("the pump was driven before the crash")
	}
	m.Stop(t, syscall.SIGKILL) // the session, and the command in it, are lost
	m.Start(t)
	// A witness subscribed before the gateway restarts hears the answers
	// to the client's resends: once it has one, the client must have it
	// too, within a short grace, or it is not listening.
	witness := testctl.Connect(t, m.URL, wire.Topics{GatewayID: gatewayID(t)})

	p = startProc(t, nil, "run", "--config", cfg, "--log-level", "warn")
	waitAPI(t, httpAddr, p)
	var a answer
	select {
	case a = <-answered:
	case <-time.After(30 * time.Second):
		t.Fatalf("no answer within 30 s of the restart: the client did not resend after the broker lost the command\n%s", p.output())
	case <-witnessed(witness, cmd.ID, 30*time.Second):
		select {
		case a = <-answered:
		case <-time.After(2 * time.Second):
			t.Fatalf("the gateway answered the resend, but the client did not hear it: it did not subscribe again after the reconnect\n%s", p.output())
		}
	}
	if a.err != nil || a.res.Outcome != fence.Duplicate || a.res.Fence != cmd.Fence || a.res.State != fence.StateOn {
		t.Fatalf("answer = %+v, %v; want duplicate at %s, on", a.res, a.err, cmd.Fence)
	}
	st := apiStatus(t, httpAddr)["pump"]
	if st.Drives == nil || *st.Drives != 1 || st.Level != "high" {
		t.Errorf("pump after the answer: level %q, driven %v times since the restart; want high, driven once (at start, to the recorded state)", st.Level, st.Drives)
	}
}

// witnessed is closed once ctl hears an answer with the given id within d.
func witnessed(ctl *testctl.Controller, id string, d time.Duration) <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		if _, ok := ctl.TryResult(id, d); ok {
			close(ch)
		}
	}()
	return ch
}
