package mqttlink

import (
	"fmt"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"

	"github.com/fencegate/fencegate/wire"
)

// send publishes payload on topic, unless the broker would refuse the
// topic (wire.CheckTopic): a broker closes the connection of a client
// that publishes on a topic with a control character or a wildcard, and
// delivers the command that caused it again after the reconnect. Every
// publish of the link goes through here, whatever its topic was built
// from (a command's reply topic, a name from the configuration); such a
// publish is not made, and its token fails at once, saying why.
func send(c mqtt.Client, topic string, qos byte, retained bool, payload any) mqtt.Token {
	if err := wire.CheckTopic(topic); err != nil {
		return failed{fmt.Errorf("not published: %w", err)}
	}
	return c.Publish(topic, qos, retained, payload)
}

// failed is the token of a publish that was not made.
type failed struct{ err error }

func (failed) Wait() bool                     { return true }
func (failed) WaitTimeout(time.Duration) bool { return true }
func (failed) Done() <-chan struct{}          { return closedChan }
func (f failed) Error() error                 { return f.err }

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()
