// Package site tests fencegate across a site: gateways on their own
// Mosquittos (as on their Raspberry Pis), bridged to the site's broker by
// the Mosquitto bridge that gateway bridge writes, with controllers on
// the site's broker. Every part is a real process (Mosquitto, gateway run),
// and each bridge reaches the site's broker through a TCP proxy that the
// test cuts and restores (see bridge_test.go).
package site
