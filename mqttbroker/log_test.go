package mqttbroker

import (
	"context"
	"log/slog"
	"net"
	"testing"
	"time"
)

// records is a log handler that passes each record on a channel.
type records chan slog.Record

func (c records) Enabled(context.Context, slog.Level) bool { return true }
func (c records) Handle(_ context.Context, r slog.Record) error {
	c <- r
	return nil
}
func (c records) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c records) WithGroup(string) slog.Handler      { return c }

// TestClientLeavingIsNotAWarning: a client that closes its connection
// without DISCONNECT, as a killed mosquitto_sub or gateway does, and a
// probe that never sends CONNECT, are ordinary: mochi logged each as
// level=WARN msg="". Each is logged at debug level, with a message.
func TestClientLeavingIsNotAWarning(t *testing.T) {
	log := make(records, 64)
	b, err := Start("127.0.0.1:0", slog.New(log))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	// MQTT 3.1.1 CONNECT, clean session, keep-alive 60 s, client id "a".
	connect := []byte{0x10, 13, 0, 4, 'M', 'Q', 'T', 'T', 4, 0x02, 0, 60, 0, 1, 'a'}
	for _, tt := range []struct {
		name    string
		connect bool
	}{{"a client closing its socket", true}, {"a probe", false}} {
		c, err := net.Dial("tcp", b.Addr())
		if err != nil {
			t.Fatal(err)
		}
		if tt.connect {
			c.SetDeadline(time.Now().Add(10 * time.Second))
			if _, err := c.Write(connect); err != nil {
				t.Fatal(err)
			}
			ack := make([]byte, 4)
			if _, err := c.Read(ack); err != nil || ack[0] != 0x20 {
				t.Fatalf("CONNACK: %x, %v", ack, err)
			}
		}
		c.Close()
		for {
			var r slog.Record
			select {
			case r = <-log:
			case <-time.After(10 * time.Second):
				t.Fatalf("%s: no log record of the connection's end within 10 s", tt.name)
			}
			if r.Message != "" && r.Message != "client connection ended" && r.Message != "client connection failed" {
				continue // mochi's own, such as "client disconnected" at debug level
			}
			if r.Message == "" || r.Level != slog.LevelDebug {
				t.Errorf("%s: logged level=%v msg=%q; want a message at debug level", tt.name, r.Level, r.Message)
			}
			break
		}
	}
}
