package metrics

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/fencegate/fencegate/actuator"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/fencelog"
	"github.com/fencegate/fencegate/tests/testenv"
)

var examples = filepath.Join("..", "examples")

// The example alert rules are valid (promtool check rules), and fire on the
// series that should fire them and only those (promtool test rules, with
// the series of fencegate-rules.test.yml).
func TestAlertRules(t *testing.T) {
	promtool := testenv.Program(t, "promtool")
	dir := filepath.Join(examples, "prometheus")
	for _, args := range [][]string{{"check", "rules", "fencegate-rules.yml"}, {"test", "rules", "fencegate-rules.test.yml"}} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// Every metric the example rules and dashboard use is one the gateway
// exports: a renamed metric must not leave an alert that never fires or a
// panel that stays empty.
func TestExamplesUseExportedMetrics(t *testing.T) {
	store := filepath.Join(t.TempDir(), "fence.db")
	if err := os.WriteFile(store, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	m := New([]string{"pump"})
	m.Read(Sources{Store: func() fencelog.Stats { return fencelog.Stats{} }, StorePath: store,
		Fences: func() (map[string]fence.Fence, error) { return map[string]fence.Fence{"pump": {Token: 1}}, nil },
		Broker: func() Broker { return Broker{} }, Version: "test"})
	ob := m.Observer()
	ob.Decided(actuator.Event{Result: fence.Result{Actuator: "pump", Outcome: fence.Applied}})
	ob.Admitted(time.Millisecond, 1)
	ob.Driven("pump", time.Millisecond, nil)
	m.OnCommit(time.Millisecond, 1)
	mfs, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	exported := map[string]bool{}
	for _, mf := range mfs {
		exported[mf.GetName()] = true
	}
	name := regexp.MustCompile(`fencegate_[a-z_]+`)
	for _, f := range []string{filepath.Join("prometheus", "fencegate-rules.yml"), filepath.Join("grafana", "fencegate-dashboard.json")} {
		b, err := os.ReadFile(filepath.Join(examples, f))
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(f, ".json") {
			var d struct {
				Panels []struct {
					Title   string
					Targets []struct{ Expr string }
				}
			}
			if err := json.Unmarshal(b, &d); err != nil || len(d.Panels) == 0 {
				t.Fatalf("%s: %v, %d panels", f, err, len(d.Panels))
			}
		}
		for _, n := range name.FindAllString(string(b), -1) {
			base := n
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if s, ok := strings.CutSuffix(n, suffix); ok && exported[s] {
					base = s
				}
			}
			if !exported[base] && base != "fencegate_rules" && base != "fencegate_dashboard" {
				t.Errorf("%s uses %s, which the gateway does not export", f, n)
			}
		}
	}
}
