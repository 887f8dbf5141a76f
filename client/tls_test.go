package client_test

import (
	"context"
	"crypto/x509"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fencegate/fencegate/client"
	"github.com/fencegate/fencegate/mqttsec"
	"github.com/fencegate/fencegate/tests/testenv"
)

// TestDialTLS: Dial connects over TLS with a CA file, a client certificate
// and a password file; a wrong CA or password fails with the reason, in
// the names of the Options (or of Names), and unwraps to the cause.
func TestDialTLS(t *testing.T) {
	certs := testenv.MakeCerts(t)
	b := testenv.MosquittoTLS(t, testenv.TLSBrokerOptions{Certs: certs, RequireCertificate: true, Users: map[string]string{"ctl": "ctl-pw"}})
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte("ctl-pw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	good := client.Options{Broker: b.URL, GatewayID: "gw", Username: "ctl", PasswordFile: pw,
		TLS: &client.TLS{CAFile: certs.CA, CertFile: certs.Client, KeyFile: certs.ClientKey}}
	c, err := client.Dial(ctx, good)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	c.Close()

	wrongCA := good
	wrongCA.TLS = &client.TLS{CAFile: certs.OtherCA, CertFile: certs.Client, KeyFile: certs.ClientKey}
	_, err = client.Dial(ctx, wrongCA)
	var unknown x509.UnknownAuthorityError
	if err == nil || !strings.Contains(err.Error(), "not signed by a CA in Options.TLS.CAFile "+certs.OtherCA) || !errors.As(err, &unknown) {
		t.Errorf("Dial with the wrong CA = %v, want the reason naming Options.TLS.CAFile, unwrapping to x509.UnknownAuthorityError", err)
	}
	wrongCA.Names = mqttsec.Names{CAFile: "--ca"}
	if _, err = client.Dial(ctx, wrongCA); err == nil || !strings.Contains(err.Error(), "not signed by a CA in --ca "+certs.OtherCA) {
		t.Errorf("Dial with the wrong CA and Names = %v, want the reason naming --ca", err)
	}

	t.Setenv(mqttsec.EnvPassword, "wrong-pw")
	fromEnv := good
	fromEnv.PasswordFile = ""
	if _, err = client.Dial(ctx, fromEnv); err == nil || !strings.Contains(err.Error(), `refused user "ctl" with the password from $FENCEGATE_MQTT_PASSWORD`) {
		t.Errorf("Dial with a wrong password from the environment = %v", err)
	}
	fromEnv.Password = "ctl-pw" // given: the environment is not read
	if c, err := client.Dial(ctx, fromEnv); err != nil {
		t.Errorf("Dial with the password given = %v", err)
	} else {
		c.Close()
	}
}

// TestOptionsCheck: options that cannot work are refused before anything
// connects, without repeating a password.
func TestOptionsCheck(t *testing.T) {
	for _, tt := range []struct {
		o    client.Options
		want string
	}{
		{client.Options{Broker: "tcp://h:1883", TLS: &client.TLS{CAFile: "ca.crt"}}, "Options.Broker tcp://h:1883 is not a TLS URL"},
		{client.Options{Broker: "ssl://h:8883", TLS: &client.TLS{CertFile: "c.crt"}}, "Options.TLS.CertFile is set without Options.TLS.KeyFile"},
		{client.Options{Broker: "ssl://ctl:Pw-hidden@h:8883"}, "Options.Broker: remove the user name and password from the URL"},
		{client.Options{Broker: "ssl://h:8883", PasswordFile: "pw"}, "a password needs Options.Username"},
		{client.Options{Broker: "ssl://h:8883", Username: "u", Password: "x", PasswordFile: "pw"}, "give the password once"},
		{client.Options{Broker: "ssl://h:8883", TLS: &client.TLS{ServerName: "h:8883"}}, `Options.TLS.ServerName "h:8883"`},
	} {
		err := tt.o.Check()
		if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "Pw-hidden") {
			t.Errorf("Check(%+v) = %v, want %q", tt.o, err, tt.want)
		}
		if _, derr := client.Dial(context.Background(), tt.o); derr == nil || derr.Error() != err.Error() {
			t.Errorf("Dial(%+v) = %v, want Check's error", tt.o, derr)
		}
	}
	if err := (client.Options{Broker: "mqtts://h:8883", Username: "u", PasswordFile: "pw", TLS: &client.TLS{CAFile: "ca"}}).Check(); err != nil {
		t.Errorf("Check(good options) = %v", err)
	}
}
