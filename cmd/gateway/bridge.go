package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strings"

	"github.com/fencegate/fencegate/config"
	"github.com/fencegate/fencegate/hass"
	"github.com/fencegate/fencegate/mqttsec"
	"github.com/fencegate/fencegate/sitebridge"
	"github.com/fencegate/fencegate/wire"
)

func cmdBridge(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("bridge", "--config FILE (--topology | --site FILE | --site-acl USER)", `
Connects a gateway on a Raspberry Pi's own Mosquitto to the site's broker
(docs/site.md). Reads the configuration alone (as check --config-only).

--topology prints "local" if the configuration's mqtt.broker is this
machine's (a loopback address), or "direct URL" if the gateway connects to
another broker itself.

--site FILE reads a bridge file (the image card's bridge.txt: broker,
username, client_id) and prints the Mosquitto bridge that carries the
gateway's topics to and from that broker, each the way the gateway uses it
(its first line, "# bridge: ...", says so in a sentence; "# bridge: off"
alone for a file that turns the bridge off);
--credentials DIR is where Mosquitto finds the site's CA (ca.crt) and this
Pi's client certificate (client.crt, client.key), --password-file the
password of the bridge's user.

--site-acl USER prints the lines the site broker's ACL needs for the
bridge's user USER.`)
	cfgPath := fs.String("config", "", "the gateway's configuration file (YAML)")
	topology := fs.Bool("topology", false, `print "local" or "direct URL": where the gateway's broker is`)
	site := fs.String("site", "", "bridge file (bridge.txt) to print the Mosquitto bridge for")
	creds := fs.String("credentials", "/etc/mosquitto/bridge", "directory of the site's ca.crt and this Pi's client.crt, client.key (with --site)")
	passFile := fs.String("password-file", "", "file holding the bridge user's password on the site's broker (with --site)")
	hostID := fs.String("host-id", "", "a short id of this machine, part of the bridge's client id (with --site)")
	siteACL := fs.String("site-acl", "", "print the site broker's ACL lines for the bridge's user `USER`")
	if err := fs.parseNoArgs(args, stdout, stderr); err != nil {
		return err
	}
	n := 0
	for _, on := range []bool{*topology, *site != "", *siteACL != ""} {
		if on {
			n++
		}
	}
	if n != 1 {
		return usageErr("give one of --topology, --site FILE or --site-acl USER (gateway bridge -h)")
	}
	cfg, err := loadForCheck(*cfgPath, true)
	if err != nil {
		return err
	}
	if *topology {
		if local, err := onThisMachine(cfg.MQTT.Broker); err != nil {
			return configErr(fmt.Errorf("%s: mqtt.broker: %v", *cfgPath, err))
		} else if local {
			fmt.Fprintln(stdout, "local")
		} else {
			fmt.Fprintln(stdout, "direct", mqttsec.Redacted(cfg.MQTT.Broker))
		}
		return nil
	}
	o, err := bridgeOptions(cfg)
	if err != nil {
		return configErr(err)
	}
	if *siteACL != "" {
		text, err := sitebridge.SiteACL(*siteACL, o)
		if err != nil {
			return usageErr("--site-acl: %v", err)
		}
		_, err = io.WriteString(stdout, text)
		return err
	}
	if local, err := onThisMachine(cfg.MQTT.Broker); err != nil || !local {
		return configErr(fmt.Errorf("%s: mqtt.broker is %s, not this machine's Mosquitto: a bridge carries the topics of a gateway on this machine's broker (tcp://127.0.0.1:1883); remove the bridge file to connect to the site's broker directly, or set mqtt.broker back", *cfgPath, mqttsec.Redacted(cfg.MQTT.Broker)))
	}
	f, err := os.Open(*site)
	if err != nil {
		return configErr(fmt.Errorf("bridge file: %w", err))
	}
	defer f.Close()
	s, err := sitebridge.Parse(f, *site)
	if err != nil {
		return configErr(err)
	}
	if s.Off {
		// Said, not written: the caller removes the bridge it had.
		fmt.Fprintln(stdout, "# bridge: off")
		return nil
	}
	if *passFile != "" {
		b, err := os.ReadFile(*passFile)
		switch {
		case os.IsNotExist(err):
		case err != nil:
			return configErr(fmt.Errorf("password file: %w", err))
		default:
			o.Password = strings.TrimRight(string(b), "\r\n")
		}
	}
	o.Credentials, o.HostID = *creds, *hostID
	text, err := sitebridge.Conf(s, o)
	if err != nil {
		return configErr(fmt.Errorf("%s: %w", *site, err))
	}
	_, err = io.WriteString(stdout, text)
	return err
}

// bridgeOptions are the topics of cfg's gateway that a bridge carries.
func bridgeOptions(cfg *config.Config) (sitebridge.Options, error) {
	o := sitebridge.Options{Topics: wire.Topics{Prefix: cfg.MQTT.TopicPrefix, GatewayID: cfg.ID}, Inputs: len(cfg.Inputs) > 0}
	if ha := cfg.HomeAssistant; ha != nil {
		d, err := hass.New(hass.Options{Prefix: ha.DiscoveryPrefix, Topics: o.Topics})
		if err != nil {
			return o, err
		}
		o.Discovery, o.Birth = d.Topic, d.BirthTopic
	}
	return o, nil
}

// onThisMachine says whether a broker URL names this machine: a loopback
// address or localhost.
func onThisMachine(broker string) (bool, error) {
	b, err := mqttsec.BrokerURL(broker)
	if err != nil {
		return false, err
	}
	u, err := url.Parse(b)
	if err != nil {
		return false, err
	}
	h := strings.ToLower(strings.TrimSuffix(u.Hostname(), "."))
	if h == "localhost" {
		return true, nil
	}
	if ip := net.ParseIP(h); ip != nil {
		return ip.IsLoopback(), nil
	}
	// This machine's own name (greenhouse, greenhouse.local) is this
	// machine too: its Mosquitto must not be turned off for it.
	if me, err := os.Hostname(); err == nil {
		me = strings.ToLower(me)
		if h == me || h == me+".local" || strings.HasPrefix(me, h+".") {
			return true, nil
		}
	}
	return false, nil
}
