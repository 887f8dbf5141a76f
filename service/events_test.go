package service_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fencegate/fencegate/config"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/tests/testctl"
	"github.com/fencegate/fencegate/tests/testenv"
)

// TestDecisionsReachTheirListeners: a command decided over MQTT reaches
// the listeners of the gateway's events: the event stream (GET
// /api/events), the metrics, and the retained state.
func TestDecisionsReachTheirListeners(t *testing.T) {
	broker := testenv.EmbeddedBroker(t)
	dir := t.TempDir()
	cfg, err := config.Parse([]byte(fmt.Sprintf(testConfig, broker, filepath.Join(dir, "fence.db"))))
	if err != nil {
		t.Fatal(err)
	}
	cfg.ID = testenv.ID(t, "events")
	g := startConfig(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+g.info.HTTP+"/api/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	rd := bufio.NewReader(resp.Body)
	rd.ReadString('\n') // the opening comment: the stream is subscribed once it arrives

	ctl := testctl.Connect(t, broker, g.topics())
	ctl.WaitStatus(t, "online")
	id := testenv.ID(t, "b")
	expect(t, ctl.Send(t, cmd(id, "pump", 42, 0, fence.StateOn)), fence.Applied, fence.Fence{Token: 42}, fence.StateOn)

	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatalf("the event stream ended before the decision of %s: %v", id, err)
		}
		if strings.HasPrefix(line, "data:") && strings.Contains(line, id) {
			break
		}
	}
	ctl.State(t, "pump", func(o fence.Output) bool { return o.Fence == fence.Fence{Token: 42} && o.State == fence.StateOn })
	m, err := http.Get("http://" + g.info.HTTP + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer m.Body.Close()
	b, _ := io.ReadAll(m.Body)
	if want := `fencegate_commands_total{actuator="pump",outcome="applied",reason=""} 1`; !strings.Contains(string(b), want) {
		t.Errorf("metrics after one command applied lack %s", want)
	}
}
