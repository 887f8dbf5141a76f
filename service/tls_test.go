package service_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fencegate/fencegate/client"
	"github.com/fencegate/fencegate/config"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/service"
	"github.com/fencegate/fencegate/tests/testenv"
	"github.com/fencegate/fencegate/wire"
)

// tlsGateway writes a gateway configuration for broker with the mqtt.tls
// section tlsYAML (its keys, indented by four spaces) and, if password is
// not empty, user "gateway" with that password in a password file next to
// it; it returns the loaded configuration.
func tlsGateway(t *testing.T, id, broker, tlsYAML, password string) *config.Config {
	t.Helper()
	dir := t.TempDir()
	mqtt := fmt.Sprintf("  broker: %s\n", broker)
	if password != "" {
		if err := os.WriteFile(filepath.Join(dir, "mqtt.password"), []byte(password+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		mqtt += "  username: gateway\n  password_file: mqtt.password\n"
	}
	if tlsYAML != "" {
		mqtt += "  tls:\n" + tlsYAML
	}
	text := fmt.Sprintf("id: %s\nmqtt:\n%sstore: fence.db\nboard: sim\nhttp: \"127.0.0.1:0\"\nactuators:\n  - {name: pump, pin: GPIO17}\n", id, mqtt)
	path := filepath.Join(dir, "gateway.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatalf("config.Load:\n%s\n%v", text, err)
	}
	return cfg
}

// TestBrokerTLS: a gateway connects to a real Mosquitto
// over TLS, with a password from a file, and applies a command; each fault
// of the connection (the wrong CA, the wrong server name, the broker's
// expired certificate, a wrong password, a missing client certificate) is
// said in the log and in /api/status in words that name the setting to
// fix, and the gateway keeps trying, with backoff, without stopping.
func TestBrokerTLS(t *testing.T) {
	certs := testenv.MakeCerts(t)
	users := map[string]string{"gateway": "gw-Secret-1", "ctl": "ctl-Secret-2"}
	ca := fmt.Sprintf("    ca_file: %s\n", certs.CA)
	clientCert := fmt.Sprintf("    cert_file: %s\n    key_file: %s\n", certs.Client, certs.ClientKey)

	// connects runs a gateway and has a controller, over TLS too, switch
	// its pump on.
	connects := func(t *testing.T, b *testenv.TLSBroker, tlsYAML string) {
		t.Helper()
		id := testenv.ID(t, "tls")
		var log testenv.Buffer
		addr := runListening(t, tlsGateway(t, id, b.URL, tlsYAML, users["gateway"]), &log)
		// With the right settings no attempt fails: a failed one is
		// answer enough, without waiting for the online status.
		waitFor(t, 20*time.Second, "taking commands over TLS", func() bool {
			st := apiStatus(t, addr)
			if st.Broker.Failures > 0 {
				t.Fatalf("a connection attempt with the right settings failed: %s\n%s", st.Broker.LastError, log.String())
			}
			return st.Broker.Subscribed
		})
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		ctl, err := client.Dial(ctx, client.Options{Broker: b.URL, GatewayID: id, Username: "ctl", Password: users["ctl"],
			TLS: &client.TLS{CAFile: certs.CA, CertFile: certs.Client, KeyFile: certs.ClientKey}})
		if err != nil {
			t.Fatalf("controller: %v", err)
		}
		defer ctl.Close()
		if err := ctl.WaitStatus(ctx, wire.StatusOnline); err != nil {
			t.Fatalf("gateway not online over TLS: %v\n%s", err, log.String())
		}
		res, err := ctl.Send(ctx, fence.Command{Actuator: "pump", Fence: fence.Fence{Token: 1}, State: fence.StateOn})
		if err != nil || res.Outcome != fence.Applied {
			t.Fatalf("command over TLS = %+v, %v; want applied", res, err)
		}
		if st := apiStatus(t, addr); !st.Broker.Connected || !st.Broker.Subscribed || st.Broker.Failures != 0 {
			t.Errorf("status = %+v, want connected and taking commands", st.Broker)
		}
	}

	var refusedAt func(t *testing.T, url, tlsYAML, password string, want ...string) (string, *testenv.Buffer)
	// refused runs a gateway that the broker (or its own check of the
	// broker) refuses, and checks that the reason is in the log and the
	// status, and that it keeps trying.
	refused := func(t *testing.T, b *testenv.TLSBroker, tlsYAML, password string, want ...string) (addr string, log *testenv.Buffer) {
		t.Helper()
		return refusedAt(t, b.URL, tlsYAML, password, want...)
	}
	refusedAt = func(t *testing.T, url, tlsYAML, password string, want ...string) (addr string, log *testenv.Buffer) {
		t.Helper()
		log = &testenv.Buffer{}
		addr = runListening(t, tlsGateway(t, testenv.ID(t, "tls"), url, tlsYAML, password), log)
		waitFor(t, 15*time.Second, "two failed attempts", func() bool {
			st := apiStatus(t, addr)
			if st.Broker.Connected {
				t.Fatalf("connected to the broker (%+v), want refused:\n%s", st.Broker, log.String())
			}
			return st.Broker.Failures >= 2
		})
		st := apiStatus(t, addr)
		for _, w := range want {
			if !strings.Contains(st.Broker.LastError, w) {
				t.Errorf("last_error = %q, want %q", st.Broker.LastError, w)
			}
		}
		if st.Broker.Connected || st.Broker.Subscribed {
			t.Errorf("status = %+v, want not connected", st.Broker)
		}
		lines := strings.Count(log.String(), `msg="cannot connect to the broker"`)
		if lines != 1 || !strings.Contains(strings.ReplaceAll(log.String(), `\"`, `"`), want[0]) {
			t.Errorf("log has %d 'cannot connect' lines for %d attempts, want 1 with %q:\n%s", lines, st.Broker.Failures, want[0], log.String())
		}
		return addr, log
	}

	t.Run("good", func(t *testing.T) {
		connects(t, testenv.MosquittoTLS(t, testenv.TLSBrokerOptions{Certs: certs, Users: users}), ca)
	})
	t.Run("wrong CA", func(t *testing.T) {
		b := testenv.MosquittoTLS(t, testenv.TLSBrokerOptions{Certs: certs, Users: users})
		refused(t, b, "    ca_file: "+certs.OtherCA+"\n", users["gateway"],
			"the broker's certificate is not signed by a CA in mqtt.tls.ca_file "+certs.OtherCA, `signed by "fencegate test CA"`)
	})
	t.Run("wrong server name", func(t *testing.T) {
		b := testenv.MosquittoTLS(t, testenv.TLSBrokerOptions{Certs: certs, Users: users})
		refused(t, b, ca+"    server_name: broker.example\n", users["gateway"],
			`the broker's certificate is for localhost, 127.0.0.1, not for "broker.example" (mqtt.tls.server_name)`)
	})
	t.Run("expired certificate", func(t *testing.T) {
		b := testenv.MosquittoTLS(t, testenv.TLSBrokerOptions{Certs: certs, Expired: true, Users: users})
		refused(t, b, ca, users["gateway"], "the broker's certificate expired at", "renew it on the broker")
	})
	t.Run("wrong password", func(t *testing.T) {
		b := testenv.MosquittoTLS(t, testenv.TLSBrokerOptions{Certs: certs, Users: users})
		addr, log := refused(t, b, ca, "gw-Secret-one-letter-off",
			`not authorised: the broker refused user "gateway" with the password from mqtt.password_file `, "mqtt.password")
		// The broker's administrator sets the gateway's password to the one
		// it has: its next attempt gets in, without a restart.
		b.WritePasswords(t, map[string]string{"gateway": "gw-Secret-one-letter-off", "ctl": users["ctl"]})
		b.Reload(t)
		waitFor(t, 45*time.Second, "taking commands after the broker's password file was fixed", func() bool { return apiStatus(t, addr).Broker.Subscribed })
		if !strings.Contains(log.String(), "connected to the broker") {
			t.Errorf("log does not say it connected:\n%s", log.String())
		}
	})
	t.Run("client certificate required and missing", func(t *testing.T) {
		b := testenv.MosquittoTLS(t, testenv.TLSBrokerOptions{Certs: certs, RequireCertificate: true, Users: users})
		refused(t, b, ca, users["gateway"], "the broker requires a client certificate", "set mqtt.tls.cert_file and mqtt.tls.key_file")
	})
	t.Run("client certificate of another CA", func(t *testing.T) {
		b := testenv.MosquittoTLS(t, testenv.TLSBrokerOptions{Certs: certs, RequireCertificate: true, Users: users})
		refused(t, b, fmt.Sprintf("%s    cert_file: %s\n    key_file: %s\n", ca, certs.OtherClient, certs.OtherClientKey), users["gateway"],
			"the broker refused this client's certificate, mqtt.tls.cert_file "+certs.OtherClient)
	})
	t.Run("plain URL for the TLS port", func(t *testing.T) {
		b := testenv.MosquittoTLS(t, testenv.TLSBrokerOptions{Certs: certs, Users: users})
		refusedAt(t, strings.Replace(b.URL, "ssl://", "tcp://", 1), "", users["gateway"],
			"if that port is the broker's TLS listener, use ssl:// in mqtt.broker")
	})
	t.Run("TLS URL for a plain port", func(t *testing.T) {
		refusedAt(t, strings.Replace(testenv.Mosquitto(t), "tcp://", "ssl://", 1), ca, users["gateway"],
			"the broker closed the connection during the TLS handshake: is 127.0.0.1:")
	})
	t.Run("client certificate", func(t *testing.T) {
		connects(t, testenv.MosquittoTLS(t, testenv.TLSBrokerOptions{Certs: certs, RequireCertificate: true, Users: users}), ca+clientCert)
	})
}

// TestCheckBrokerTLS: gateway check --broker says what run's log says, for
// a TLS fault as for a password, and that the right settings work.
func TestCheckBrokerTLS(t *testing.T) {
	certs := testenv.MakeCerts(t)
	b := testenv.MosquittoTLS(t, testenv.TLSBrokerOptions{Certs: certs, Users: map[string]string{"gateway": "gw-Secret-1"}})
	for _, tt := range []struct {
		name, tls, password, want string
		warning                   bool
	}{
		{"good", "    ca_file: " + certs.CA + "\n", "gw-Secret-1", "accepts the gateway's credentials", false},
		{"wrong CA", "    ca_file: " + certs.OtherCA + "\n", "gw-Secret-1", "the broker's certificate is not signed by a CA in mqtt.tls.ca_file", true},
		{"wrong password", "    ca_file: " + certs.CA + "\n", "wrong", `not authorised: the broker refused user "gateway"`, true},
	} {
		cfg := tlsGateway(t, "chk-tls", b.URL, tt.tls, tt.password)
		var found bool
		for _, f := range service.Check(context.Background(), cfg, service.CheckOptions{Init: true, Broker: true}) {
			if f.Step == "password" && !strings.Contains(f.Text, `user "gateway", the password from mqtt.password_file`) {
				t.Errorf("%s: password finding = %+v", tt.name, f)
			}
			if f.Step != "broker" {
				continue
			}
			found = true
			if f.Warning != tt.warning || f.Err != nil || !strings.Contains(f.Text, tt.want) {
				t.Errorf("%s: broker finding = %+v, want warning=%v with %q", tt.name, f, tt.warning, tt.want)
			}
		}
		if !found {
			t.Errorf("%s: no broker finding", tt.name)
		}
	}
}
