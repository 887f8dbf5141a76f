package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencegate/fencegate/boards"
	"github.com/fencegate/fencegate/client"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/tests/testenv"
)

// envPartitioned makes the test binary the partitioned controller (see
// partitionedController) instead of running tests.
const envPartitioned = "FENCEGATE_TEST_PARTITIONED_CONTROLLER"

func init() {
	if os.Getenv(envPartitioned) != "" {
		os.Exit(partitionedController(os.Stdin, os.Stdout))
	}
}

// partitionedController is a controller that believes what it was told: it
// acquires a lease when asked ("acquire": it answers "granted TOKEN"), and
// sends commands under that token when asked ("send on|off SEQ": it answers
// "answer OUTCOME FENCE-TOKEN"), whether or not its lease still exists. It
// never looks at Lost: it is the process that a partition cut off from etcd
// after its grant, and that acts on the grant. Its settings come from
// FENCEGATE_TEST_PARTITIONED_CONTROLLER: etcd URL, broker URL, gateway id,
// actuator, holder, separated by spaces.
func partitionedController(in io.Reader, out io.Writer) int {
	f := strings.Fields(os.Getenv(envPartitioned))
	if len(f) != 5 {
		fmt.Fprintf(out, "error %s: want etcd broker gateway actuator holder\n", envPartitioned)
		return 2
	}
	etcdURL, broker, gw, actuator, holder := f[0], f[1], f[2], f[3], f[4]
	ctx := context.Background()
	ctl, err := client.Dial(ctx, client.Options{Broker: broker, GatewayID: gw})
	if err != nil {
		fmt.Fprintf(out, "error %v\n", err)
		return 1
	}
	defer ctl.Close()
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	scope, err := ctl.Scope(sctx, actuator)
	cancel()
	if err != nil {
		fmt.Fprintf(out, "error %v\n", err)
		return 1
	}
	var token uint64
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		cmd := strings.Fields(sc.Text())
		switch {
		case len(cmd) == 1 && cmd[0] == "acquire":
			// A new connection each time: the old one may still wait for
			// its retransmissions over the link that was cut.
			cli, err := clientv3.New(clientv3.Config{Endpoints: []string{etcdURL}, DialTimeout: 5 * time.Second})
			if err != nil {
				fmt.Fprintf(out, "error %v\n", err)
				continue
			}
			actx, cancel := context.WithTimeout(ctx, 60*time.Second)
			l, err := lease.Acquire(actx, cli, lease.Options{Gateway: gw, Scope: scope, TTL: 2})
			cancel()
			if err != nil {
				fmt.Fprintf(out, "error %v\n", err)
				continue
			}
			token = l.Token()
			fmt.Fprintf(out, "granted %d\n", token)
			// The lease and its client are left to run out: this
			// controller never lets go, and never notices.
		case len(cmd) == 3 && cmd[0] == "send":
			seq, _ := strconv.ParseUint(cmd[2], 10, 64)
			state := fence.StateOn
			if cmd[1] == "off" {
				state = fence.StateOff
			}
			sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			res, err := ctl.Send(sctx, fence.Command{Actuator: actuator, Holder: holder, Fence: fence.Fence{Token: token, Seq: seq}, State: state})
			cancel()
			if res.Outcome == "" {
				fmt.Fprintf(out, "error %v\n", err)
				continue
			}
			fmt.Fprintf(out, "answer %s %d\n", res.Outcome, res.Fence.Token)
		default:
			fmt.Fprintf(out, "error unknown request %q\n", sc.Text())
		}
	}
	return 0
}

// TestPartitionedControllerIsStale: a partition, not a pause.
// Controller A runs in a network namespace of its own, with one link to
// the broker and one to etcd. It is granted the pump's lease and acts;
// then its link to etcd is cut while it keeps the broker. Its lease
// expires in etcd while A, running all along, still believes it holds it;
// B acquires (above A) and commits; A sends under its token: stale, every
// time, and the pump keeps B's state. Twenty repetitions, the link
// restored in between.
func TestPartitionedControllerIsStale(t *testing.T) {
	t.Parallel() // long (etcd leases run out); nothing shared with the other tests
	ns := testenv.NewNetns(t, 2)
	toBroker, toEtcd := ns.Links[0], ns.Links[1]
	broker, brokerForA := testenv.MosquittoOn(t, toBroker.HostAddr)
	cluster := testenv.StartEtcdClusterOn(t, 1, toEtcd.HostAddr)
	etcd, etcdForA := cluster.Endpoints(), cluster.Members[0].ClientURLOn(toEtcd.HostAddr)
	latch := gatewayProc(t, broker)

	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	a := ns.Command(self, "-test.run=^$")
	a.Env = append(os.Environ(), envPartitioned+"="+strings.Join([]string{etcdForA, brokerForA[0], gatewayID(t), "pump", "controller-a"}, " "))
	stdin, err := a.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := a.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	a.Stderr = os.Stderr
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); a.Process.Kill(); a.Wait() })
	answers := bufio.NewScanner(stdout)
	ask := func(req string) []string {
		t.Helper()
		fmt.Fprintln(stdin, req)
		if !answers.Scan() {
			t.Fatalf("controller A ended at %q", req)
		}
		f := strings.Fields(answers.Text())
		if len(f) == 0 || f[0] == "error" {
			t.Fatalf("controller A, %q: %s", req, answers.Text())
		}
		return f
	}

	const reps = 20
	var stale int
	for i := range reps {
		stateA, stateB := "on", "off"
		if i%2 == 1 {
			stateA, stateB = "off", "on"
		}
		f := ask("acquire")
		tokA, _ := strconv.ParseUint(f[1], 10, 64)
		// A holds its lease and acts.
		if f := ask("send " + stateA + " 1"); f[1] != "applied" {
			t.Fatalf("rep %d: A (token %d) holding its lease: %v, want applied", i, tokA, f)
		}

		toEtcd.Down()
		// B is granted only once A's lease is gone from etcd.
		// B's own lease is long enough for a busy machine; if B still loses
		// it between the grant and the check (send refuses then, as it
		// must), B tries again: that is B's availability, not A's safety.
		var out string
		var code int
		for try := range 3 {
			out, code = runCLI(t, "send", "--broker", broker, "--gateway", gatewayID(t), "--actuator", "pump", "--etcd", etcd, "--ttl", "6",
				"--holder", "controller-b", "--id", testenv.ID(t, fmt.Sprint("b", i, "-", try)), "--timeout", "30s", stateB)
			if !strings.Contains(out, "lock obtained after the lease was lost") {
				break
			}
		}
		m := grantedRE.FindStringSubmatch(out)
		if code != 0 || m == nil || !strings.Contains(out, `"outcome":"applied"`) {
			t.Fatalf("rep %d: B: exit %d, want applied\n%s", i, code, out)
		}
		tokB, _ := strconv.ParseUint(m[1], 10, 64)
		if tokB <= tokA {
			t.Fatalf("rep %d: B's token %d is not above A's %d", i, tokB, tokA)
		}
		// A, cut off from etcd but not from the broker, acts on its grant.
		for seq := 2; seq <= 3; seq++ {
			f := ask(fmt.Sprintf("send %s %d", stateA, seq))
			if f[1] != string(fence.Stale) || f[2] != strconv.FormatUint(tokB, 10) {
				t.Fatalf("rep %d: A (token %d, seq %d) after B's grant %d: %v, want stale with B's fence", i, tokA, seq, tokB, f)
			}
			stale++
		}
		if lm, _ := boards.ReadLatch(latch); lm["GPIO17"] != (stateB == "on") {
			t.Fatalf("rep %d: pump latch high=%v, want B's state %s", i, lm["GPIO17"], stateB)
		}
		toEtcd.Up()
	}
	t.Logf("%d repetitions: A's %d commands after the partition all stale", reps, stale)
}
