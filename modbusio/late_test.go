package modbusio

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fencegate/fencegate/actuator"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/fencelog"
	"github.com/fencegate/fencegate/metrics"
	"github.com/fencegate/fencegate/modbusio/modbusconf"
	"github.com/fencegate/fencegate/modbusio/modbussim"
	"github.com/fencegate/fencegate/tests/testenv"
)

// TestLateWriteNeverAfterNewer is issue 33's sequence on a real Modbus
// TCP module: token 20's "on" reaches a module that is busy (held by the
// test, far longer than the gateway's 200 ms timeout), so it is answered
// failed; token 21's "off" follows at once; then the module carries out
// the held write. Before the bus settled timed-out writes, token 21's
// write went on a new connection, was carried out first, and token 20's
// "on" landed after it: the coil stayed on until the watch found it at
// its next poll and drove it back, reported as changed behind the
// gateway's back. Now the bus reads the coil back on the write's own
// connection before it sends token 21's write, so the late write lands
// first, and is reported as the gateway's own late write (log and
// Health.LateWrites), not as out of band. The test measures the window:
// how long the coil was at token 20's state after token 21's write was
// carried out; it must be zero.
func TestLateWriteNeverAfterNewer(t *testing.T) {
	addr := fmt.Sprintf("tcp://127.0.0.1:%d", testenv.Port(t))
	mod, err := modbussim.Start(addr, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mod.Close() })
	// The settling is given far longer than the test can take on a busy
	// machine: the module is released as soon as the bus settles.
	bus, err := NewBus(modbusconf.Bus{URL: addr, Timeout: 200 * time.Millisecond, Settle: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bus.Close() })
	// The settling starts once token 20's write timed out: the module
	// carries it out then, as a slow module would while the gateway
	// waits.
	settling := make(chan *Output, 1)
	testSettling = func(o *Output) {
		select {
		case settling <- o:
		default:
		}
	}
	t.Cleanup(func() { testSettling = nil })

	store, err := fencelog.Open(filepath.Join(t.TempDir(), "fence.db"), &fencelog.Options{Create: fencelog.Fresh(), AuditFlush: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	var logs testenv.Buffer
	const poll = 200 * time.Millisecond
	bank, err := actuator.New(store, []actuator.Spec{{Name: "pump", Scope: "pump", PinName: "coil0", Poll: poll}},
		&actuator.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	pin := output(t, bus, modbusconf.Output{Unit: 1, Table: modbusconf.Coils, Address: 0})
	if err := bank.Start(func(string) (actuator.Pin, error) { return pin, nil }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(bank.Stop)
	send := func(token uint64, s fence.State, want fence.Outcome) {
		t.Helper()
		c := fence.Command{ID: fmt.Sprint("c-", token), Actuator: "pump", Holder: "ctl", Fence: fence.Fence{Token: token}, State: s}
		res, err := bank.Handle(context.Background(), c)
		if err != nil || res.Outcome != want {
			t.Fatalf("token %d %s: %v (%s), %v; want %v", token, s, res.Outcome, res.Error, err, want)
		}
	}
	send(19, fence.StateOff, fence.Applied)

	arrived, release := mod.Stall()
	t.Cleanup(release)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		select {
		case o := <-settling:
			if o != pin {
				t.Errorf("settling %s; want the pump's coil", o)
			}
			release() // the module carries out token 20's write now
		case <-stop:
		}
	}()
	send(20, fence.StateOn, fence.Failed) // the module holds it: timed out
	<-arrived
	send(21, fence.StateOff, fence.Applied)
	applied := time.Now()
	release() // if it is still held, token 21 went ahead of it

	// The held write lands, before token 21's or after it.
	var late, off int
	waitLog := func(what string, ok func([]modbussim.Write) bool) []modbussim.Write {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			if l := mod.Log(); ok(l) {
				return l
			} else if time.Now().After(deadline) {
				t.Fatalf("waited 20 s for %s; the module carried out %+v", what, l)
			}
		}
	}
	log := waitLog("token 20's held write", func(l []modbussim.Write) bool {
		for i, w := range l {
			if w.Stalled {
				late = i
				return true
			}
		}
		return false
	})
	for i, w := range log {
		if w.Value == 0 && !w.At.After(applied) {
			off = i // token 21's write: the last off carried out before its answer
		}
	}
	if late > off {
		// After token 21's write: measure until the watch drives it back.
		log = waitLog("the coil driven back off", func(l []modbussim.Write) bool { return len(l) > late+1 })
		t.Errorf("token 20's write landed %v after token 21's (carried out at %s) and left the coil on for %v, until the watch drove it back; want it carried out before token 21's",
			log[late].At.Sub(log[off].At).Round(time.Millisecond), log[off].At.Format("15:04:05.000"), log[late+1].At.Sub(log[late].At).Round(time.Millisecond))
	} else {
		t.Logf("token 20's write landed %v before token 21's: the window is zero", log[off].At.Sub(log[late].At).Round(time.Millisecond))
	}

	// Two polls later, the coil is off as recorded, the late write was
	// reported as the gateway's own and not as out of band.
	time.Sleep(2 * poll)
	if mod.Coil(0) {
		t.Error("the coil is on; token 21 recorded off")
	}
	h, _ := bank.Health("pump")
	if h.LateWrites != 1 || h.OutOfBand != 0 {
		t.Errorf("health = %+v; want one late write of the gateway's own, none out of band", h)
	}
	m := metrics.New([]string{"pump"})
	m.Read(metrics.Sources{Watched: bank.Healths})
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	for _, want := range []string{`fencegate_output_late_writes_total{actuator="pump"} 1`, `fencegate_output_out_of_band_total{actuator="pump"} 0`} {
		if !strings.Contains(rec.Body.String(), want+"\n") {
			t.Errorf("the metrics lack %s", want)
		}
	}
	if got := logs.String(); !strings.Contains(got, "the gateway's own late write landed") || !strings.Contains(got, "write of on") ||
		strings.Contains(got, "behind the gateway's back") {
		t.Errorf("the log does not report the gateway's own late write (and only it):\n%s", got)
	}
}
