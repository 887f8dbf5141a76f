package habridge

import (
	"context"
	"strings"
	"testing"
)

// TestRunRefusesTopicPartsABrokerRefuses: a name or prefix that would make
// a topic a broker refuses is refused before anything connects.
func TestRunRefusesTopicPartsABrokerRefuses(t *testing.T) {
	for _, o := range []Options{
		{Actuators: []string{"pu\nmp"}},
		{Actuators: []string{"pump"}, Setpoints: []string{"dim\x00mer"}},
		{Actuators: []string{"a/b"}},
		{Actuators: []string{"\xff"}},
		{Actuators: []string{"pump\uffff"}},
		{Actuators: []string{"pump"}, DiscoveryPrefix: "home\x1bassistant"},
		{Actuators: []string{"pump"}, BridgePrefix: "fencegate/+"},
	} {
		err := Run(context.Background(), o)
		if err == nil || !strings.Contains(err.Error(), "habridge:") || strings.Contains(err.Error(), "etcd") {
			t.Errorf("%+v: %v; want it refused by name", o, err)
		}
	}
}
