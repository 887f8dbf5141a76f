package service_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fencegate/fencegate/config"
	"github.com/fencegate/fencegate/httpapi"
	"github.com/fencegate/fencegate/service"
	"github.com/fencegate/fencegate/tests/testctl"
	"github.com/fencegate/fencegate/tests/testenv"
	"github.com/fencegate/fencegate/wire"
)

// runListening runs a gateway with cfg and returns its API address once it
// listens, whether or not it reaches the broker; it stops when t ends.
func runListening(t *testing.T, cfg *config.Config, log *testenv.Buffer) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	listening := make(chan service.Info, 1)
	done := make(chan error, 1)
	go func() {
		done <- service.Run(ctx, cfg, service.Options{Init: true, Version: "test",
			Logger:    slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug})),
			Listening: func(i service.Info) { listening <- i }})
	}()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case i := <-listening:
		return i.HTTP
	case err := <-done:
		done <- err // for the cleanup's wait
		t.Fatalf("gateway stopped: %v", err)
	case <-time.After(15 * time.Second):
		t.Fatal("gateway API not listening within 15s")
	}
	return ""
}

func apiStatus(t testing.TB, addr string) httpapi.Status {
	t.Helper()
	var st httpapi.Status
	getJSON(t, addr, "/api/status", &st)
	return st
}

// getJSON decodes the answer to GET path from the API at addr into v.
func getJSON(t testing.TB, addr, path string, v any) {
	t.Helper()
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("decode %s: %v", path, err)
	}
}

// waitFor polls cond until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// visID is the gateway id of TestBrokerFailuresAreVisible: unique to the
// run, though each subtest has a broker of its own.
var visID = fmt.Sprintf("vis-%d", os.Getpid())

func brokerConfig(t *testing.T, broker, user, password string) *config.Config {
	t.Helper()
	return gatewayConfig(t, visID, broker, user, password)
}

// gatewayConfig is a gateway with one actuator, pump, that logs in to
// broker as user, with its store in a temporary directory.
func gatewayConfig(t *testing.T, id, broker, user, password string) *config.Config {
	t.Helper()
	text := fmt.Sprintf("id: %s\nmqtt: {broker: %q, username: %q, password: %q}\nstore: %s\nboard: sim\nhttp: \"127.0.0.1:0\"\nactuators:\n  - {name: pump, pin: GPIO17}\n",
		id, broker, user, password, filepath.Join(t.TempDir(), "fence.db"))
	cfg, err := config.Parse([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestBrokerFailuresAreVisible: a broker the
// gateway cannot reach, a wrong password and a subscription the broker
// starves are each said in the log, once per reason and not once per
// attempt, and in GET /api/status; the gateway keeps trying, and takes
// commands once the broker lets it.
func TestBrokerFailuresAreVisible(t *testing.T) {
	t.Run("refused", func(t *testing.T) {
		var log testenv.Buffer
		addr := runListening(t, brokerConfig(t, "tcp://127.0.0.1:1", "", ""), &log)
		waitFor(t, 10*time.Second, "two failed attempts", func() bool { return apiStatus(t, addr).Broker.Failures >= 2 })
		st := apiStatus(t, addr)
		if st.Broker.Connected || st.Broker.Subscribed || !strings.Contains(st.Broker.LastError, "connection refused") ||
			st.GatewayID != visID || st.Version != "test" || st.StoreID == "" {
			t.Errorf("status = %+v, want not connected, refused, with the gateway's id, version and store id", st)
		}
		if n := strings.Count(log.String(), "cannot connect to the broker"); n != 1 || !strings.Contains(log.String(), "connection refused") {
			t.Errorf("log has %d 'cannot connect' lines for %d attempts, want 1 with the reason:\n%s", n, st.Broker.Failures, log.String())
		}
	})

	users := map[string]string{"gateway": "secret", "ctl": "ctlpw"}
	full := `
user gateway
topic readwrite fencegate/{id}/#
user ctl
topic readwrite fencegate/{id}/#`
	full = strings.ReplaceAll(full, "{id}", visID)
	t.Run("wrong password", func(t *testing.T) {
		b := testenv.MosquittoAuth(t, users, full)
		var log testenv.Buffer
		addr := runListening(t, brokerConfig(t, b.URL, "gateway", "not-the-secret"), &log)
		waitFor(t, 10*time.Second, "a failed attempt", func() bool { return apiStatus(t, addr).Broker.Failures >= 1 })
		st := apiStatus(t, addr)
		if st.Broker.Connected || !strings.Contains(st.Broker.LastError, "not authorised") || !strings.Contains(st.Broker.LastError, "mqtt.password") {
			t.Errorf("status = %+v, want refused: not authorised, naming the password", st.Broker)
		}
		if !strings.Contains(log.String(), "cannot connect to the broker") {
			t.Errorf("log does not say it:\n%s", log.String())
		}
	})

	t.Run("starved subscription", func(t *testing.T) {
		// The gateway may not read its command topics: Mosquitto grants the
		// subscription (MQTT 3.1.1 has no way to say no) and delivers nothing.
		b := testenv.MosquittoAuth(t, users, strings.ReplaceAll(`
user gateway
topic readwrite fencegate/{id}/status
topic readwrite fencegate/{id}/instance
topic write fencegate/{id}/+/result
topic write fencegate/{id}/+/state
topic write fencegate/{id}/+/set
user ctl
topic readwrite fencegate/{id}/#`, "{id}", visID))
		var log testenv.Buffer
		addr := runListening(t, brokerConfig(t, b.URL, "gateway", "secret"), &log)
		waitFor(t, 20*time.Second, "the starved subscription reported", func() bool {
			return strings.Contains(apiStatus(t, addr).Broker.LastError, "delivers nothing")
		})
		st := apiStatus(t, addr)
		if !st.Broker.Connected || st.Broker.Subscribed {
			t.Errorf("status = %+v, want connected but not taking commands", st.Broker)
		}
		if !strings.Contains(log.String(), "not taking commands") || !strings.Contains(log.String(), "read and write") {
			t.Errorf("log does not say why commands are not taken:\n%s", log.String())
		}
		// The operator fixes the ACL; the gateway's retries find it.
		b.WriteACL(t, full)
		b.Reload(t)
		topics := wire.Topics{GatewayID: visID}
		ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
		defer cancel()
		ctl := testctl.ConnectAs(t, b.URL, topics, "ctl", "ctlpw")
		if err := ctl.Client.WaitStatus(ctx, wire.StatusOnline); err != nil {
			t.Fatalf("after the ACL was fixed: %v\n%s", err, log.String())
		}
		if st := apiStatus(t, addr); !st.Broker.Subscribed {
			t.Errorf("status after the fix = %+v, want taking commands", st.Broker)
		}
	})
}
