package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencegate/fencegate/boards"
	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/tests/testenv"
)

// TestPausedControllerAcrossEtcdFailover: the lease service
// fails over while controllers hold and acquire leases and the pause
// scenario runs. A three-member etcd cluster on loopback; its leader is
// killed (SIGKILL) at a different point of the pause scenario in each
// round: while A (gateway send, stopped after its grant) is paused, while
// B waits for the lock, right after B's grant, and just before A
// continues. Meanwhile two example controllers contend for the pump: the
// active one is stopped each round and the other takes over.
//
// Every grant of the pause scenario is above the one before it, across
// every failover; the paused A is answered stale every time, with B's
// fence, and the output shows B's state; the example controllers' tokens
// rise with each handover, and the gateway applied nothing in any scope
// below what it had applied before.
func TestPausedControllerAcrossEtcdFailover(t *testing.T) {
	t.Parallel() // long (etcd leases run out); nothing shared with the other tests
	cluster := testenv.StartEtcdCluster(t, 3)
	etcd := cluster.Endpoints()
	broker := testenv.EmbeddedBroker(t)
	latch := gatewayProc(t, broker)
	cli, err := clientv3.New(clientv3.Config{Endpoints: strings.Split(etcd, ","), DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()

	// Two example controllers on the pump: one acts, the other waits.
	pumpLock := lease.Key(gatewayID(t), "pump")
	ctls := []*exampleCtl{startExampleCtlOut(t, etcd, broker, "pump", "ctl-x"), startExampleCtlOut(t, etcd, broker, "pump", "ctl-y")}
	t.Cleanup(func() {
		if t.Failed() {
			for _, c := range ctls {
				t.Logf("example controller (pid %d, state %s):\n%s", c.cmd.Process.Pid, processState(c.cmd.Process.Pid), c.out)
			}
		}
	})
	pumpTok := lockHolder(t, cli, pumpLock, 2)

	// The pause scenario on the fan (scope climate).
	base := []string{"send", "--broker", broker, "--gateway", gatewayID(t), "--actuator", "fan", "--etcd", etcd, "--ttl", "2", "--timeout", "30s"}
	climate := lease.Key(gatewayID(t), "climate")
	var tokens []uint64 // the pause scenario's grants, in causal order
	var failovers []time.Duration
	var restart []*testenv.EtcdMember
	failover := func(when string) {
		killed, took := cluster.Failover(60 * time.Second)
		failovers = append(failovers, took)
		t.Logf("%s: killed the leader %s; a new leader after %v", when, killed.Name, took)
		restart = append(restart, killed)
	}
	phases := []string{"A paused", "B waiting", "B granted", "A continues"}
	for round, phase := range phases {
		restart = nil
		stateB, stateA := "off", "on"
		if round%2 == 1 {
			stateB, stateA = "on", "off"
		}
		// The pump's active controller (the one granted the token of the
		// lock's oldest key) stops: the other takes over once its lease
		// runs out, across this round's failover.
		active, waiting := ctls[0], ctls[1]
		for deadline := time.Now().Add(60 * time.Second); !active.granted(pumpTok); active, waiting = waiting, active {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: neither example controller says it was granted the pump's lock token %d:\n%s\n%s", round, pumpTok, ctls[0].out, ctls[1].out)
			}
			time.Sleep(5 * time.Millisecond) // its log line follows its grant
		}
		if err := testenv.Pause(active.cmd.Process); err != nil {
			t.Skip(err)
		}

		a := startStoppedSend(t, append(base, "--holder", "controller-a", "--id", testenv.ID(t, fmt.Sprint("a", round)), stateA)...)
		tokens = append(tokens, a.token)
		if phase == "A paused" {
			failover(fmt.Sprintf("round %d, A (token %d) paused", round, a.token))
		}
		b := startSend(t, append(base, "--holder", "controller-b", "--id", testenv.ID(t, fmt.Sprint("b", round)), stateB)...)
		if phase == "B waiting" {
			waitLockKeys(t, cli, climate, 2) // B's key is there, behind A's
			failover(fmt.Sprintf("round %d, B waiting behind A (token %d)", round, a.token))
		}
		b.waitStopped(t)
		tokens = append(tokens, b.token)
		if phase == "B granted" {
			failover(fmt.Sprintf("round %d, B granted token %d", round, b.token))
		}
		if out, code := b.resume(t); code != 0 || !strings.Contains(out, `"outcome":"applied"`) {
			t.Fatalf("round %d (%s): B (token %d): exit %d, want applied\n%s", round, phase, b.token, code, out)
		}
		tokB := b.token

		if phase == "A continues" {
			failover(fmt.Sprintf("round %d, before A (token %d) continues", round, a.token))
		}
		out, code := a.resume(t)
		if code != exitStale || !strings.Contains(out, `"outcome":"stale"`) || !strings.Contains(out, fmt.Sprintf(`"fence":{"token":%d,`, tokB)) {
			t.Fatalf("round %d (%s): A (token %d, after B's %d): exit %d, want %d (stale) with B's fence\n%s", round, phase, a.token, tokB, code, exitStale, out)
		}
		if lm, _ := boards.ReadLatch(latch); lm["GPIO22"] != (stateB == "on") {
			t.Fatalf("round %d (%s): fan latch high=%v, want B's state %s", round, phase, lm["GPIO22"], stateB)
		}

		// The pump: the waiting controller took over above the stopped
		// one; that one, continued, recovers (stale or lease lost, as it
		// happens first) and contends again: two keys under the lock.
		// With 2 s leases a failover can also take the lease of the one
		// that runs: roles change, tokens still rise.
		tok := waiting.waitGrantAbove(t, pumpTok)
		testenv.Resume(active.cmd.Process)
		if got := lockHolder(t, cli, pumpLock, 2); got < tok {
			t.Errorf("round %d: the pump's lock is held under token %d, below the grant %d", round, got, tok)
		}
		pumpTok = lockHolder(t, cli, pumpLock, 2)

		for _, m := range restart {
			m.Start()
		}
	}

	for i := 1; i < len(tokens); i++ {
		if tokens[i] <= tokens[i-1] {
			t.Errorf("grant %d got token %d, not above grant %d's %d (tokens %v)", i, tokens[i], i-1, tokens[i-1], tokens)
		}
	}
	n := checkAppliedInFenceOrder(t, auditOf(t, apiAddr(latch)))
	t.Logf("pause scenario tokens %v; the pump's last holder %d; applied per scope %v; failovers %v", tokens, pumpTok, n, failovers)
}
