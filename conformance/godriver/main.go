// Command godriver is the Go client's driver of the conformance suite's
// pause test (see ../README.md): it takes the actuator's scope's lease
// from etcd with package lease, sends one command with package client,
// and writes what happened as JSON lines on stdout.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencegate/fencegate/client"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/lease"
)

// Exit codes, as the suite's README gives them.
const (
	exitError    = 1
	exitStale    = 3
	exitRejected = 4
	exitFailed   = 5
	exitTimeout  = 6 // no answer within --timeout
	exitOutput   = 7 // applied or duplicate, but the output is not as asked
	exitLost     = 8 // the lease was lost before the command was sent: nothing was sent
	exitUsage    = 64
)

func main() { os.Exit(run(os.Args[1:])) }

func run(args []string) int {
	fs := flag.NewFlagSet("godriver", flag.ContinueOnError)
	broker := fs.String("broker", "", "broker URL")
	gw := fs.String("gateway", "", "gateway id")
	etcdURL := fs.String("etcd", "", "etcd URL")
	actuator := fs.String("actuator", "", "actuator")
	holder := fs.String("holder", "", "holder name")
	id := fs.String("id", "", "command id")
	ttl := fs.Int("ttl", 10, "lease TTL, seconds")
	timeout := fs.Float64("timeout", 30, "seconds to wait for the lock and the answer")
	stop := fs.Bool("stop-after-grant", false, "stop this process (SIGSTOP) after the grant, before the command; the command is then sent without the lease's check, for the gateway to refuse")
	stopUnder := fs.Bool("stop-under-lease", false, "stop this process (SIGSTOP) after the grant, before the command; the command is then sent under the lease, as any controller's")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if fs.NArg() != 1 || (fs.Arg(0) != "on" && fs.Arg(0) != "off") || *broker == "" || *gw == "" || *etcdURL == "" || *actuator == "" || (*stop && *stopUnder) {
		fmt.Fprintln(os.Stderr, "usage: godriver --broker URL --gateway ID --etcd URL --actuator NAME [--holder NAME] [--id ID] [--ttl S] [--timeout S] [--stop-after-grant | --stop-under-lease] on|off")
		return exitUsage
	}
	state := fence.StateOff
	if fs.Arg(0) == "on" {
		state = fence.StateOn
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(*timeout*float64(time.Second)))
	defer cancel()
	code, err := drive(ctx, *broker, *gw, *etcdURL, *actuator, *holder, *id, *ttl, *stop, *stopUnder, state)
	if err != nil {
		fmt.Fprintln(os.Stderr, "godriver:", err)
	}
	return code
}

func drive(ctx context.Context, broker, gw, etcdURL, actuator, holder, id string, ttl int, stop, stopUnder bool, state fence.State) (int, error) {
	c, err := client.Dial(ctx, client.Options{Broker: broker, GatewayID: gw})
	if err != nil {
		return exitError, err
	}
	defer c.Close()
	scope, err := c.Scope(ctx, actuator)
	if err != nil {
		return exitError, err
	}
	etcd, err := clientv3.New(clientv3.Config{Endpoints: strings.Split(etcdURL, ","), DialTimeout: 5 * time.Second})
	if err != nil {
		return exitError, fmt.Errorf("etcd: %w", err)
	}
	defer etcd.Close()
	l, err := lease.Acquire(ctx, etcd, lease.Options{Gateway: gw, Scope: scope, TTL: ttl})
	if err != nil {
		return exitError, err
	}
	defer l.Release(ctx)
	emit(map[string]any{"event": "granted", "token": strconv.FormatUint(l.Token(), 10), "scope": scope})
	if stop || stopUnder {
		if err := pauseSelf(); err != nil {
			return exitError, err
		}
	}
	cmd := fence.Command{ID: id, Actuator: actuator, Holder: holder, Fence: fence.Fence{Token: l.Token()}, State: state}
	var r fence.Result
	if stop {
		r, err = c.Send(ctx, cmd) // the pause test: the gateway alone must refuse it
	} else {
		r, err = c.SendUnder(ctx, l, cmd)
	}
	if errors.Is(err, lease.ErrLost) {
		emit(map[string]any{"event": "lost", "token": strconv.FormatUint(l.Token(), 10), "reason": err.Error()})
		return exitLost, nil
	}
	var (
		se *client.StaleError
		re *client.RejectedError
		fe *client.FailedError
		oe *client.OutputError
	)
	if r.Outcome != "" {
		emit(map[string]any{"event": "answer", "outcome": r.Outcome, "reason": r.Reason, "fence": pair(r.Fence), "state": r.State.String()})
	}
	switch {
	case errors.As(err, &se):
		// A fence that no newer holder of this etcd can have raised:
		// say so, acquiring again cannot help.
		var ahead *lease.AheadError
		if err := l.CheckFence(ctx, r.Fence.Token); errors.As(err, &ahead) {
			fmt.Fprintln(os.Stderr, "godriver:", err)
		}
		// Reread: a state at least as new as the fence the answer carries.
		o, err := c.WaitState(ctx, actuator, func(o fence.Output) bool { return !o.Fence.Less(r.Fence) })
		if err != nil {
			return exitError, err
		}
		emit(map[string]any{"event": "reread", "state": o.State.String(), "fence": pair(o.Fence)})
		return exitStale, nil
	case errors.As(err, &re):
		return exitRejected, nil
	case errors.As(err, &fe):
		return exitFailed, nil
	case errors.As(err, &oe):
		return exitOutput, err
	case errors.Is(err, client.ErrTimeout):
		return exitTimeout, err
	case err != nil:
		return exitError, err
	}
	return 0, nil
}

func pair(f fence.Fence) map[string]string {
	return map[string]string{"token": strconv.FormatUint(f.Token, 10), "seq": strconv.FormatUint(f.Seq, 10)}
}

func emit(v map[string]any) {
	b, _ := json.Marshal(v)
	os.Stdout.Write(append(b, '\n'))
}
