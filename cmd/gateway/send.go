package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencegate/fencegate/client"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/wire"
)

// Exit codes of gateway send.
const (
	exitStale    = 3
	exitRejected = 4
	exitFailed   = 5
	exitTimeout  = 6
	exitOutput   = 7
	exitLost     = 8
)

const sendAbout = `
Sends one tokenized command and prints the gateway's answer (JSON) on stdout.
"fence" sends a fence-only command: it raises the scope's fence, drives
nothing. "pulse" sends a pulse of --pulse to a pulse output (kind: pulse);
"on" to a pulse output is a pulse of its default width. "duty" sets a
set-point output (kind: setpoint) to --duty percent (0 is off). "reset" is a
fence-only command that releases a tripped scope once its input is clear.
With --etcd the token comes from an etcd lock on the actuator's fence
scope, which the gateway publishes (the lock key's CreateRevision), and
the lock is released afterwards. With --key and --signer the command is
signed (see gateway keygen), as a gateway that requires signatures wants.
The command names this process's reply topic, PREFIX/GATEWAY/reply/CLIENT-ID,
so that its answer reaches it alone (see docs/protocol.md, Answers).

With --etcd the command is sent under the lease: if it was lost before the
publish (etcd answered no keep-alive within the TTL), nothing is sent.

Exit codes: 0 applied or duplicate, 3 stale, 4 rejected, 5 failed, 6 no
answer (timeout), 7 applied or duplicate but the output is not in the state
asked for (changed since, or a failed drive), 8 the lease was lost before
the command was sent (nothing was sent), 64 bad usage, 1 other errors
(broker or etcd unreachable).`

func cmdSend(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	fs := newFlags("send", "--gateway ID --actuator NAME (--token N | --etcd URL) [--key PATH.key --signer NAME] [flags] on|off|fence|pulse|duty|reset", sendAbout)
	fs.hintOnError = true
	defer func() { err = fs.hinted(err) }() // every usage error names the fix, and -h
	conn := addBrokerFlags(fs)
	gw := fs.String("gateway", "", "gateway id (required)")
	act := fs.String("actuator", "", "actuator name (required)")
	token := fs.uintRange("token", 1, fence.MaxToken, "fencing token `N`, 1 to 2^63-1 (or use --etcd)")
	seq := fs.uintRange("seq", 0, fence.MaxSeq, "sequence number `N` under the token, 0 to 2^63-1")
	id := fs.String("id", "", "command id (default: generated)")
	holder := fs.String("holder", "", "holder name for the audit trail (default: gateway-send@HOST)")
	timeout := fs.Duration("timeout", 10*time.Second, "how long to wait for the answer (with --etcd: for the lock too)")
	etcdURL := fs.String("etcd", "", "obtain the token from an etcd lock at this endpoint (comma-separated list)")
	ttl := fs.Int("ttl", 10, "with --etcd: lease time to live in seconds")
	signing := addSignFlags(fs)
	pulseWidth := fs.Duration("pulse", 0, "with pulse: the pulse's width, whole milliseconds, 1ms to 10m")
	dutyText := fs.String("duty", "", "with duty: the set-point, percent from 0 to 100 in steps of 0.01 (0 is off)")
	shared := fs.Bool("shared-answers", false, "name no reply topic: the gateway answers on the actuator's shared result topic, to all its subscribers (for a gateway older than reply topics)")
	stop := fs.Bool("stop-after-grant", false, "with --etcd: stop this process (SIGSTOP) after the grant and before the publish, to demonstrate a paused controller; continue it with SIGCONT: the command is sent, for the gateway's fence to refuse")
	stopUnder := fs.Bool("stop-under-lease", false, "with --etcd: stop as --stop-after-grant does, but when continued send under the lease, as a controller does: if it was lost meanwhile, nothing is sent (exit 8)")
	pos, err := fs.parseInterspersed(args, stdout, stderr)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageErr("give exactly one of on, off, fence, pulse, duty or reset (got %q)", pos)
	}
	var state fence.State
	var duty fence.Duty
	var setpoint bool
	switch pos[0] {
	case "on":
		state = fence.StateOn
	case "off":
		state = fence.StateOff
	case "pulse":
		state = fence.StateOn
		if *pulseWidth <= 0 || *pulseWidth%time.Millisecond != 0 || *pulseWidth > fence.MaxPulse {
			return usageErr("pulse needs --pulse, whole milliseconds from 1ms to %v (got %v); on asks a pulse output for its default width", fence.MaxPulse, *pulseWidth)
		}
	case "duty":
		d, err := fence.ParseDuty(*dutyText)
		if err != nil {
			return usageErr("duty needs --duty: %v", err)
		}
		duty, setpoint, state = d, true, d.State()
	case "fence", "reset":
	default:
		return usageErr("state %q: want on, off, fence, pulse, duty or reset", pos[0])
	}
	if *dutyText != "" && pos[0] != "duty" {
		return usageErr("--duty goes with duty, not %s", pos[0])
	}
	if *pulseWidth != 0 && pos[0] != "pulse" {
		return usageErr("--pulse goes with pulse, not %s", pos[0])
	}
	if *gw == "" || *act == "" {
		return usageErr("--gateway and --actuator are required")
	}
	if (*token == 0) == (*etcdURL == "") {
		return usageErr("give either --token N (1 to 2^63-1) or --etcd URL")
	}
	if *timeout <= 0 {
		return usageErr("--timeout %v: want a positive duration, e.g. 10s", *timeout)
	}
	if *ttl < 1 {
		return usageErr("--ttl %d: want whole seconds, at least 1 (etcd raises a TTL below its minimum)", *ttl)
	}
	var endpoints []string
	if *etcdURL != "" {
		if endpoints, err = etcdEndpoints(*etcdURL); err != nil {
			return usageErr("%v", err)
		}
	}
	if (*stop || *stopUnder) && *etcdURL == "" {
		return usageErr("--stop-after-grant and --stop-under-lease go with --etcd")
	}
	if *stop && *stopUnder {
		return usageErr("give --stop-after-grant (sent without the lease's check) or --stop-under-lease (sent under it), not both")
	}
	if *holder == "" {
		host, _ := os.Hostname()
		*holder = "gateway-send@" + host
	}

	opts, err := conn.options(*gw)
	if err != nil {
		return err
	}
	if err := signing.apply(&opts); err != nil {
		return err
	}
	opts.SharedAnswers = *shared
	ctl, err := client.Dial(ctx, opts)
	if err != nil {
		return dialErr(err)
	}
	defer ctl.Close()

	var (
		etcd *clientv3.Client
		held *lease.Lease
	)
	if *etcdURL != "" {
		// The lease is the scope's, as the gateway says: actuators that
		// share a scope share one lease and one fence.
		scope, err := actuatorScope(ctx, ctl, *act, *timeout)
		if err != nil {
			return err
		}
		etcd, err = dialEtcd(endpoints, *timeout)
		if err != nil {
			return err
		}
		defer etcd.Close()
		// The session lives on the command's context: its keep-alive
		// holds the lock until the answer came, and Release revokes it.
		l, err := lease.Acquire(ctx, etcd, lease.Options{Gateway: *gw, Scope: scope, TTL: *ttl, Wait: *timeout})
		if err != nil {
			return err
		}
		defer l.Release(ctx)
		held = l
		*token = l.Token()
		fmt.Fprintf(stderr, "granted token %d (lock %s, scope %s)\n", *token, l.Key(), scope)
		if *stop || *stopUnder {
			// A pause after the grant, before the publish.
			if err := pauseSelf(stderr); err != nil {
				return err
			}
			fmt.Fprintf(stderr, "continued\n")
		}
	}

	c := fence.Command{ID: *id, Holder: *holder, Actuator: *act, Fence: fence.Fence{Token: *token, Seq: *seq}, State: state, Pulse: *pulseWidth, Reset: pos[0] == "reset",
		Setpoint: setpoint, Duty: duty}
	sctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	var res fence.Result
	if held != nil && !*stop {
		res, err = ctl.SendUnder(sctx, held, c)
	} else {
		// --stop-after-grant shows a paused controller: its command must
		// reach the gateway, whose fence refuses it.
		res, err = ctl.Send(sctx, c)
	}
	if res.Outcome != "" {
		fmt.Fprintf(stdout, "%s\n", wire.EncodeResult(res))
	}
	var (
		se *client.StaleError
		re *client.RejectedError
		fe *client.FailedError
		oe *client.OutputError
	)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, lease.ErrLost):
		return &exitError{exitLost, err}
	case errors.As(err, &se):
		if held != nil {
			// A fence above every revision etcd has issued, or one at or
			// above the token of the lock we still hold, is not a newer
			// holder's: no token from this etcd can pass it. Say so.
			actx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err := held.CheckFence(actx, se.Fence().Token)
			cancel()
			var ahead *lease.AheadError
			if errors.As(err, &ahead) {
				return &exitError{exitStale, ahead}
			}
		}
		return &exitError{exitStale, se}
	case errors.As(err, &re) && re.Result.Reason == fence.ReasonUnknownActuator:
		return &exitError{exitRejected, errors.New(ctl.Unknown(*act))}
	case errors.As(err, &re):
		return &exitError{exitRejected, re}
	case errors.As(err, &fe):
		return &exitError{exitFailed, fe}
	case errors.As(err, &oe):
		return &exitError{exitOutput, oe}
	case errors.Is(err, client.ErrTimeout):
		return &exitError{exitTimeout, fmt.Errorf("no answer within %v: %w", *timeout, err)}
	}
	return err
}

// How actuatorScope tells an actuator the gateway does not have: once the
// retained states have stopped coming for statesSettle, looked at every
// statesPoll.
const (
	statesSettle = 500 * time.Millisecond
	statesPoll   = 50 * time.Millisecond
)

// actuatorScope returns the fence scope of act, from its retained state
// (client.Scope), waiting for it up to timeout. The gateway retains the
// state of each of its actuators, and the broker sends them all as this
// client subscribes: once states have come and no new one for
// statesSettle, an actuator whose state is not among them is none of the
// gateway's (exit 4, naming those it has), and waiting longer would not
// change that. Without any state (a gateway never online, a wrong
// --gateway) it waits for the timeout.
func actuatorScope(ctx context.Context, ctl *client.Client, act string, timeout time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	seen, since := 0, time.Now()
	for {
		wctx, wcancel := context.WithTimeout(ctx, statesPoll)
		scope, err := ctl.Scope(wctx, act)
		wcancel()
		if err == nil || ctx.Err() != nil || wctx.Err() == nil {
			return scope, err
		}
		if n := len(ctl.Actuators()); n != seen {
			seen, since = n, time.Now()
		} else if n > 0 && time.Since(since) >= statesSettle {
			return "", &exitError{exitRejected, errors.New(ctl.Unknown(act))}
		}
	}
}
