package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/fencelog"
	"github.com/fencegate/fencegate/httpapi"
)

// cmdAudit prints the audit trail: of a stopped gateway's store (opened
// read-only), or of a running gateway through its API, whose decisions
// --follow then prints as they come.
func cmdAudit(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("audit", "(--store FILE | --api URL) [--actuator A] [--outcome O] [--holder H] [--since T] [--until T] [-n N] [--json] [--follow]", `
Prints the gateway's recent decisions, oldest first, one a line: time,
actuator, outcome, the command's token and seq, the state it asked for,
holder, id, scope, the fence after it, a rejection's reason or error, and
why the gateway itself set a state (boot, safe, trip, max-on, pulse end).

Read a stopped gateway's store with --store (opened read-only: a running
gateway locks it), or a running gateway's with --api (its HTTP API, e.g.
http://127.0.0.1:8080). --follow (with --api) then prints each decision as
it is made, until interrupted.

--since and --until take an RFC 3339 time (2026-12-03T07:00:00Z) or a
duration back from now (30m, 2h). --json prints one JSON object a line.`)
	store := fs.String("store", "", "fence store `file` of a stopped gateway")
	api := fs.String("api", "", "a running gateway's HTTP API, e.g. http://127.0.0.1:8080")
	q := fencelog.AuditQuery{}
	fs.StringVar(&q.Actuator, "actuator", "", "only this actuator's decisions")
	outcome := fs.String("outcome", "", "only decisions with this outcome ("+outcomeList()+")")
	fs.StringVar(&q.Holder, "holder", "", "only commands of this holder")
	since := fs.String("since", "", "only decisions at or after this time (RFC 3339, or a duration back from now)")
	until := fs.String("until", "", "only decisions before this time (RFC 3339, or a duration back from now)")
	fs.IntVar(&q.Limit, "n", 50, "at most this many entries, the newest that match (1 to 10000)")
	asJSON := fs.Bool("json", false, "one JSON object a line")
	follow := fs.Bool("follow", false, "then print decisions as they come (with --api)")
	if err := fs.parseNoArgs(args, stdout, stderr); err != nil {
		return err
	}
	switch {
	case *store == "" && *api == "":
		return usageErr("which gateway? give --store FILE (a stopped gateway's) or --api URL (a running one's, e.g. http://127.0.0.1:8080)")
	case *store != "" && *api != "":
		return usageErr("give --store FILE (a stopped gateway) or --api URL (a running one), not both")
	case *follow && *api == "":
		return usageErr("--follow needs a running gateway: give --api URL (its store is locked while it runs)")
	case *follow && *until != "":
		return usageErr("--follow prints decisions as they come: --until cannot bound it")
	case q.Limit < 1 || q.Limit > 10000:
		return usageErr("-n %d: want a number from 1 to 10000", q.Limit)
	}
	q.Outcome = fence.Outcome(*outcome)
	if q.Outcome != "" && !slices.Contains(fence.Outcomes, q.Outcome) {
		return usageErr("--outcome %q: want one of %s", *outcome, outcomeList())
	}
	now := time.Now()
	var err error
	if q.Since, err = parseWhen("since", *since, now); err != nil {
		return err
	}
	if q.Until, err = parseWhen("until", *until, now); err != nil {
		return err
	}
	print := func(e fencelog.Entry) error {
		if *asJSON {
			b, err := json.Marshal(e)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(stdout, "%s\n", b)
			return err
		}
		_, err := fmt.Fprintln(stdout, auditLine(e))
		return err
	}
	if *store != "" {
		l, err := fencelog.Open(*store, &fencelog.Options{ReadOnly: true})
		if err != nil {
			return heldStore(err, *store)
		}
		defer l.Close()
		if err := knownActuator(q.Actuator, l.Actuators); err != nil {
			return err
		}
		es, err := l.FindAudit(q)
		if err != nil {
			return err
		}
		for _, e := range es {
			if err := print(e); err != nil {
				return err
			}
		}
		return nil
	}
	base, err := apiURL(*api)
	if err != nil {
		return err
	}
	var events *http.Response
	if *follow {
		// Listen first, so that no decision falls between the trail and
		// the stream; one made meanwhile may be printed twice.
		if events, err = openEvents(ctx, base); err != nil {
			return err
		}
		defer events.Body.Close()
	}
	if err := knownActuator(q.Actuator, func() ([]string, error) { return apiActuators(ctx, base) }); err != nil {
		return err
	}
	es, err := fetchAudit(ctx, base, q)
	if err != nil {
		return err
	}
	for _, e := range es {
		if err := print(e); err != nil {
			return err
		}
	}
	if !*follow {
		return nil
	}
	err = readEvents(events.Body, func(d httpapi.Decision) error {
		e := fencelog.Entry{At: d.At, Scope: d.Scope, Actuator: d.Actuator, ID: d.ID, Holder: d.Holder, Command: d.Command,
			Outcome: d.Outcome, Reason: d.Reason, Fence: d.Fence, Error: d.Error}
		e.State, _ = fence.ParseState(d.Want)
		if !q.Match(e) {
			return nil
		}
		return print(e)
	})
	if ctx.Err() != nil {
		return nil // interrupted: the usual end of --follow
	}
	return fmt.Errorf("audit: the gateway's event stream at %s ended: %w (is the gateway still running?)", base, err)
}

func outcomeList() string {
	var s []string
	for _, o := range fence.Outcomes {
		s = append(s, string(o))
	}
	return strings.Join(s, ", ")
}

// parseWhen reads --since or --until: an RFC 3339 time, or a duration back
// from now.
func parseWhen(name, v string, now time.Time) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, usageErr("--%s %q: want an RFC 3339 time (2026-12-03T07:00:00Z) or a duration back from now (30m, 2h)", name, v)
	}
	return t, nil
}

// auditLine formats an entry for people: the time, the actuator and the
// outcome first, then key=value pairs.
func auditLine(e fencelog.Entry) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s %s token=%d seq=%d", e.At.UTC().Format("2006-01-02T15:04:05.000Z"), e.Actuator, e.Outcome, e.Command.Token, e.Command.Seq)
	kv := func(k, v string) {
		if v != "" {
			if strings.ContainsAny(v, " \"=") {
				v = strconv.Quote(v)
			}
			fmt.Fprintf(&b, " %s=%s", k, v)
		}
	}
	kv("state", e.State.String())
	kv("holder", e.Holder)
	kv("id", e.ID)
	kv("scope", e.Scope)
	fmt.Fprintf(&b, " fence=%d/%d", e.Fence.Token, e.Fence.Seq)
	kv("reason", e.Reason)
	kv("signer", e.Signer)
	kv("error", e.Error)
	kv("why", e.Why)
	return b.String()
}

func apiURL(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, usageErr("--api %q: want the gateway's HTTP API, e.g. http://127.0.0.1:8080 (its configuration's http:)", s)
	}
	return u, nil
}

func fetchAudit(ctx context.Context, base *url.URL, q fencelog.AuditQuery) ([]fencelog.Entry, error) {
	v := url.Values{"n": {strconv.Itoa(q.Limit)}}
	for k, s := range map[string]string{"actuator": q.Actuator, "outcome": string(q.Outcome), "holder": q.Holder} {
		if s != "" {
			v.Set(k, s)
		}
	}
	if !q.Since.IsZero() {
		v.Set("since", q.Since.Format(time.RFC3339Nano))
	}
	if !q.Until.IsZero() {
		v.Set("until", q.Until.Format(time.RFC3339Nano))
	}
	u := base.JoinPath("/api/audit")
	u.RawQuery = v.Encode()
	resp, err := httpapi.Get(ctx, u.String())
	if err != nil {
		return nil, apiErr(err)
	}
	defer resp.Body.Close()
	var es []fencelog.Entry
	if err := json.NewDecoder(resp.Body).Decode(&es); err != nil {
		return nil, fmt.Errorf("audit: GET %s: %w", u, err)
	}
	return es, nil
}

// knownActuator refuses --actuator name if the gateway has no such
// actuator (names lists them), so that a misspelt name is not answered
// with an empty trail, as if the actuator had made no decision. If the
// names cannot be read, the query goes ahead.
func knownActuator(name string, names func() ([]string, error)) error {
	if name == "" {
		return nil
	}
	list, err := names()
	if err != nil || len(list) == 0 || slices.Contains(list, name) {
		return nil
	}
	return usageErr("--actuator %q: this gateway has no such actuator; its actuators are %s", name, strings.Join(list, ", "))
}

// apiActuators returns the names of a running gateway's actuators.
func apiActuators(ctx context.Context, base *url.URL) ([]string, error) {
	var as []httpapi.Actuator
	if err := httpapi.GetJSON(ctx, base.JoinPath("/api/actuators").String(), &as); err != nil {
		return nil, err
	}
	names := make([]string, 0, len(as))
	for _, a := range as {
		names = append(names, a.Name)
	}
	return names, nil
}

func openEvents(ctx context.Context, base *url.URL) (*http.Response, error) {
	resp, err := httpapi.Get(ctx, base.JoinPath("/api/events").String())
	return resp, apiErr(err)
}

// apiErr says where to look when the gateway's API cannot be reached; an
// answer other than 200 says what is wrong itself.
func apiErr(err error) error {
	var ue *url.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ue):
		return fmt.Errorf("audit: %w (is the gateway running, with its API at that address? see http: in its configuration)", err)
	}
	return fmt.Errorf("audit: %w", err)
}

// readEvents calls each with every decision of a Server-Sent Events
// stream, until the stream or each fails.
func readEvents(r io.Reader, each func(httpapi.Decision) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var name string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: ") && name == "decision":
			var d httpapi.Decision
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &d); err != nil {
				return fmt.Errorf("a decision that does not parse: %w", err)
			}
			if err := each(d); err != nil {
				return err
			}
		case line == "":
			name = ""
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return errors.New("end of stream")
}
