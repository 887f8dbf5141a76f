package pahosec_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/eclipse/paho.mqtt.golang/packets"

	"github.com/fencegate/fencegate/internal/pahosec"
	"github.com/fencegate/fencegate/mqttsec"
)

// TestExplainCredentials: a refused login names the user and where the
// password came from, never the password.
func TestExplainCredentials(t *testing.T) {
	for _, tt := range []struct {
		err  error
		s    mqttsec.Settings
		want string
	}{
		{packets.ErrorRefusedNotAuthorised, mqttsec.Settings{Names: mqttsec.GatewayNames(), Username: "gw", PasswordFrom: "mqtt.password_file /etc/fencegate/mqtt.password"},
			`not authorised: the broker refused user "gw" with the password from mqtt.password_file /etc/fencegate/mqtt.password`},
		{packets.ErrorRefusedBadUsernameOrPassword, mqttsec.Settings{Names: mqttsec.GatewayNames(), Username: "gw", PasswordFrom: "$FENCEGATE_MQTT_PASSWORD"},
			`bad user name or password: the broker refused user "gw" with the password from $FENCEGATE_MQTT_PASSWORD`},
		{packets.ErrorRefusedNotAuthorised, mqttsec.Settings{Names: mqttsec.GatewayNames()}, "takes no anonymous clients: set mqtt.username"},
		{packets.ErrorRefusedNotAuthorised, mqttsec.Settings{Names: mqttsec.GatewayNames(), Username: "gw"}, `refused user "gw" without a password`},
		{errors.New("something else"), mqttsec.Settings{Names: mqttsec.GatewayNames()}, ""},
	} {
		if got := pahosec.Explain(tt.err, tt.s); !strings.Contains(got, tt.want) || (tt.want == "") != (got == "") {
			t.Errorf("Explain(%v, %+v) = %q, want %q", tt.err, tt.s, got, tt.want)
		}
	}
}
