// Command controller is an example fencegate controller, the pattern to
// copy: it learns the actuator's fence scope from the gateway, holds an
// etcd lease on that scope, raises the gateway's fence as soon as it is
// granted, drives the actuator in a loop, and treats a stale answer as
// normal recovery: it rereads the state, lets go of its lease and acquires
// a new one (with a higher token) before it acts again. If the gateway's
// fence is above every revision etcd has issued (etcd was reset or
// restored), no new lease can help: it says so and stops.
//
//	go run ./examples/controller --etcd http://127.0.0.1:2379 --broker tcp://127.0.0.1:1883 --gateway sim --actuator pump
//
// With --key PATH.key --signer NAME it signs every command, for a gateway
// that requires signed commands (see gateway keygen).
//
// Run two of them against the same actuator: one acts, the other waits for
// the lock. Stop the active one with kill -STOP for longer than the lease's
// TTL and watch the other take over; continue it with kill -CONT and watch
// its next command be refused as stale.
package main

import (
	"context"
	"crypto/ed25519"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencegate/fencegate/client"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/sign"
)

func main() {
	etcdURL := flag.String("etcd", "http://127.0.0.1:2379", "etcd endpoints, comma-separated")
	broker := flag.String("broker", "tcp://127.0.0.1:1883", "MQTT broker")
	gateway := flag.String("gateway", "sim", "gateway id")
	actuator := flag.String("actuator", "pump", "actuator to drive")
	ttl := flag.Int("ttl", 5, "lease TTL in seconds")
	period := flag.Duration("period", time.Second, "time between commands")
	heartbeat := flag.Duration("heartbeat", 0, "send a fence-only heartbeat this often while holding the lease, for a scope with a dead-man (safe: after); 0: none")
	name := flag.String("name", "", "this controller's name, for the audit trail (default: controller-PID)")
	keyPath := flag.String("key", "", "sign commands with this private key (the PATH.key of gateway keygen); with --signer")
	signer := flag.String("signer", "", "the controller's name in the gateway's configuration (controllers: name); with --key")
	flag.Parse()
	if *name == "" {
		*name = fmt.Sprintf("controller-%d", os.Getpid())
	}
	log := slog.New(slog.NewTextHandler(os.Stdout, nil)).With("controller", *name)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	c := config{etcd: strings.Split(*etcdURL, ","), broker: *broker, gateway: *gateway, actuator: *actuator, me: *name, ttl: *ttl, period: *period, heartbeat: *heartbeat, signer: *signer}
	if (*keyPath == "") != (*signer == "") {
		log.Error("give both --key and --signer, or neither")
		os.Exit(64)
	}
	if *keyPath != "" {
		key, err := sign.ReadPrivateKey(*keyPath)
		if err != nil {
			log.Error("cannot read the signing key", "err", err)
			os.Exit(64)
		}
		c.key = key
	}
	if err := run(ctx, log, c); err != nil && ctx.Err() == nil {
		log.Error("stopped", "err", err)
		os.Exit(1)
	}
}

type config struct {
	etcd                          []string
	broker, gateway, actuator, me string
	ttl                           int
	period                        time.Duration
	heartbeat                     time.Duration      // 0: none
	signer                        string             // with key: sign every command
	key                           ed25519.PrivateKey // nil: commands go unsigned
}

func run(ctx context.Context, log *slog.Logger, c config) error {
	etcd, err := clientv3.New(clientv3.Config{Endpoints: c.etcd, DialTimeout: 5 * time.Second})
	if err != nil {
		return err
	}
	defer etcd.Close()
	gw, err := client.Dial(ctx, client.Options{Broker: c.broker, GatewayID: c.gateway, Signer: c.signer, Key: c.key})
	if err != nil {
		return err
	}
	defer gw.Close()
	// The lease belongs to the actuator's fence scope, as the gateway
	// publishes it: actuators that share a scope share one lease.
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	scope, err := gw.Scope(sctx, c.actuator)
	cancel()
	if err != nil {
		return err
	}

	for ctx.Err() == nil {
		log.Info("waiting for the lock", "scope", scope)
		l, err := lease.Acquire(ctx, etcd, lease.Options{Gateway: c.gateway, Scope: scope, TTL: c.ttl})
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			log.Warn("cannot acquire; retrying", "err", err)
			sleep(ctx, time.Second)
			continue
		}
		log.Info("granted", "token", l.Token())
		err = hold(ctx, log, gw, l, c)
		var se *client.StaleError
		var ahead *lease.AheadError
		if errors.As(err, &se) {
			// Asked before the lease is released: a fence at or above the
			// token of a lock we still hold is nobody newer's.
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			cerr := l.CheckFence(cctx, se.Fence().Token)
			cancel()
			if errors.As(cerr, &ahead) {
				l.Release(context.Background())
				return ahead
			}
		}
		l.Release(context.Background())
		switch {
		case se != nil:
			// Normal recovery: someone newer holds the scope. Reread, then
			// acquire again; the new grant's token is higher. Unless the
			// fence is above everything etcd has issued (checked above):
			// then no grant can pass it, and looping would only hide that.
			log.Warn("stale; rereading state", "fence", se.Fence().String(), "state", se.State().String(), "reason", se.Result.Error)
		case errors.Is(err, errLeaseLost):
			log.Warn("lease lost; stopping until granted again")
		case err != nil && ctx.Err() == nil:
			log.Error("giving up the lease", "err", err)
			sleep(ctx, time.Second)
		}
	}
	return nil
}

var errLeaseLost = errors.New("lease lost")

// hold acts while the lease lasts: first a fence-only command, so that the
// gateway refuses every older holder's command from now on, then one
// set-point per period with an increasing seq.
func hold(ctx context.Context, log *slog.Logger, gw *client.Client, l *lease.Lease, c config) error {
	// Seq 0: raise the fence before anything else under this token.
	if err := send(ctx, log, gw, l, fence.Command{Actuator: c.actuator, Holder: c.me, Fence: fence.Fence{Token: l.Token()}}, nil); err != nil {
		return err
	}
	var seq client.Seq // shared with the heartbeats: every pair is new
	if c.heartbeat > 0 {
		// Between set-points, heartbeats keep the scope's dead-man
		// (safe: after) from sending it to its safe state. Started after
		// the fence-only command, whose seq 0 a heartbeat would pass.
		hctx, stop := context.WithCancel(ctx)
		defer stop()
		go func() {
			err := gw.Heartbeat(hctx, client.Heartbeat{Actuator: c.actuator, Holder: c.me, Token: l.Token(), Seq: &seq, Every: c.heartbeat})
			if err != nil {
				log.Warn("heartbeats stopped", "err", err)
			}
		}()
	}
	state := fence.StateOn
	if o, ok := gw.State(c.actuator); ok && o.State == fence.StateOn {
		state = fence.StateOff
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-l.Lost():
			return errLeaseLost
		case <-time.After(c.period):
		}
		cmd := fence.Command{Actuator: c.actuator, Holder: c.me, Fence: fence.Fence{Token: l.Token(), Seq: seq.Next()}, State: state}
		if err := send(ctx, log, gw, l, cmd, &seq); err != nil {
			return err
		}
		if state == fence.StateOn {
			state = fence.StateOff
		} else {
			state = fence.StateOn
		}
	}
}

// send sends one command. On a timeout it resends the same command (same
// id, token and seq): if the first was applied, the resend is answered
// duplicate and nothing is driven twice. With seq (the heartbeats' too),
// a stale answer under the command's own token is a heartbeat that took a
// later seq and arrived first: the scope is still ours, so the same state
// goes again as a new command above the fence. Every command goes under
// the lease (SendUnder): once it is lost, by this process's clock, nothing
// more is published, however long this process paused after it decided.
func send(ctx context.Context, log *slog.Logger, gw *client.Client, l *lease.Lease, cmd fence.Command, seq *client.Seq) error {
	cmd.ID = fmt.Sprintf("%s-%d-%d", cmd.Holder, cmd.Fence.Token, cmd.Fence.Seq)
	for attempt := 0; ; attempt++ {
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		res, err := gw.SendUnder(sctx, l, cmd)
		cancel()
		if errors.Is(err, lease.ErrLost) {
			return errLeaseLost
		}
		if errors.Is(err, client.ErrTimeout) && attempt < 3 {
			log.Warn("no answer; resending the same command", "id", cmd.ID)
			continue
		}
		var stale *client.StaleError
		if seq != nil && errors.As(err, &stale) && stale.Fence().Token == cmd.Fence.Token {
			seq.Pass(stale.Fence().Seq)
			cmd.Fence.Seq = seq.Next()
			cmd.ID = fmt.Sprintf("%s-%d-%d", cmd.Holder, cmd.Fence.Token, cmd.Fence.Seq)
			log.Warn("stale under our own token: sending it again above the fence", "fence", stale.Fence().String(), "seq", cmd.Fence.Seq)
			attempt = -1
			continue
		}
		if err != nil {
			return err
		}
		what := cmd.State.String()
		if what == "" {
			what = "fence"
		}
		log.Info(string(res.Outcome), "command", what, "token", cmd.Fence.Token, "seq", cmd.Fence.Seq, "fence", res.Fence.String())
		return nil
	}
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
