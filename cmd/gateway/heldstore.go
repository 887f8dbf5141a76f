package main

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/fencegate/fencegate/config"
	"github.com/fencegate/fencegate/fencelog"
)

// packagedConfig is where the Debian package installs the configuration.
const packagedConfig = "/etc/fencegate/gateway.yaml"

// heldStore adds to err, if a running gateway holds the store that a
// command reading it (inspect, audit) was given, which API to read
// instead: that gateway's, if it can be known.
func heldStore(err error, store string) error {
	if !errors.Is(err, fencelog.ErrLocked) {
		return err
	}
	url, from := runningAPI(store)
	if url == "" {
		return fmt.Errorf("%w; but %s disables its HTTP API (http: \"\"): stop the gateway to read its store", err, from)
	}
	return fmt.Errorf("%w: gateway audit --api %s prints its decisions, %s/api/actuators its fences (%s)", err, url, url, from)
}

// runningAPI returns the HTTP API of the gateway running on store, and how
// it was found: a simulator's dashboard, recorded next to the store; the
// http address of a configuration whose store it is (gateway.yaml next to
// it, or the package's); else the default address. url is "" if that
// configuration disables the API.
func runningAPI(store string) (url, from string) {
	abs, err := filepath.Abs(store)
	if err != nil {
		abs = store
	}
	dir := filepath.Dir(abs)
	if d := simDashboard(dir); d != "" {
		return "http://" + d, "the dashboard of the simulator using " + dir
	}
	for _, path := range []string{filepath.Join(dir, "gateway.yaml"), packagedConfig} {
		c, err := config.LoadWithoutFiles(path)
		if err != nil || filepath.Clean(c.Store) != abs {
			continue
		}
		if a := c.HTTPAddr(); a != "" {
			return "http://" + a, "http of " + path + ", whose store it is"
		}
		return "", path
	}
	return "http://" + config.DefaultHTTP, "the default address: use the gateway's http setting if it has one"
}
