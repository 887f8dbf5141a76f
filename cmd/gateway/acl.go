package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/fencegate/fencegate/config"
	"github.com/fencegate/fencegate/hass"
	"github.com/fencegate/fencegate/sitebridge"
	"github.com/fencegate/fencegate/wire"
)

func cmdACL(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("acl", "--config FILE [--controller NAME]...", `
Prints a Mosquitto ACL (acl_file) for the gateway of a configuration and its
controllers: the gateway's broker user (mqtt.username) may take its
commands and publish its answers, states, status and, if configured,
inputs and Home Assistant discovery; each controller may publish commands
to this gateway and read the states, the status, the link topic of a
bridge to a site's broker (docs/site.md) and its own answers (on
reply/NAME/, which gateway send and package client name), nothing else.
Reads the configuration alone (as check --config-only).`)
	cfgPath := fs.String("config", "", "configuration file (YAML)")
	var controllers listFlag
	fs.Var(&controllers, "controller", "a controller's broker user name (repeat, or separate with commas)")
	if err := fs.parseNoArgs(args, stdout, stderr); err != nil {
		return err
	}
	cfg, err := loadForCheck(*cfgPath, true)
	if err != nil {
		return err
	}
	text, err := mosquittoACL(cfg, controllers)
	if err != nil {
		return configErr(err)
	}
	_, err = io.WriteString(stdout, text)
	return err
}

// listFlag is a flag that may be repeated, each value a comma-separated list.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*l = append(*l, s)
		}
	}
	return nil
}

// mosquittoACL renders the ACL that gives cfg's gateway and the named
// controllers what they need and no more (docs/security.md says why each
// line is there).
func mosquittoACL(cfg *config.Config, controllers []string) (string, error) {
	gw := cfg.MQTT.Username
	if gw == "" {
		return "", fmt.Errorf("mqtt.username is empty: an ACL grants topics to a broker user; set mqtt.username to the gateway's user")
	}
	seen := map[string]bool{gw: true}
	for _, c := range controllers {
		if strings.ContainsAny(c, "/+#: \t\n") {
			return "", fmt.Errorf("controller %q: a broker user name for an ACL has no '/', '+', '#', ':' or spaces", c)
		}
		if seen[c] {
			if c == gw {
				return "", fmt.Errorf("controller %q is the gateway's own user (mqtt.username): give controllers users of their own", c)
			}
			return "", fmt.Errorf("controller %q is named twice", c)
		}
		seen[c] = true
	}
	t := wire.Topics{Prefix: cfg.MQTT.TopicPrefix, GatewayID: cfg.ID}
	var b strings.Builder
	line := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	line("# Mosquitto ACL for fencegate gateway %q (gateway acl); see docs/security.md.", cfg.ID)
	line("user %s", gw)
	// The probe on $probe/set proves the subscription is not starved.
	line("topic readwrite %s", t.SetFilter())
	line("topic readwrite %s", t.Instance())
	line("topic write %s", t.ReplyFilter())
	line("topic write %s", t.ResultFilter())
	line("topic write %s", t.StateFilter())
	line("topic write %s", t.Status())
	if len(cfg.Inputs) > 0 {
		line("topic write %s", t.InputFilter())
	}
	if ha := cfg.HomeAssistant; ha != nil {
		d, err := hass.New(hass.Options{Prefix: ha.DiscoveryPrefix, Topics: t})
		if err != nil {
			return "", err
		}
		line("topic write %s", d.Topic)
		line("topic read %s", d.BirthTopic)
	}
	for _, c := range controllers {
		line("")
		line("user %s", c)
		line("topic write %s", t.SetFilter())
		line("topic read %s#", t.ReplyBase()+c+"/")
		line("topic read %s", t.StateFilter())
		line("topic read %s", t.Status())
		// Where a Pi's bridge to a site's broker says whether it is up:
		// on the site's broker, status alone may be an old "online".
		line("topic read %s", sitebridge.LinkTopic(t))
		if len(cfg.Inputs) > 0 {
			line("topic read %s", t.InputFilter())
		}
	}
	return b.String(), nil
}
