//go:build imagetest && linux

package piimage

import (
	"context"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/fencegate/fencegate/wifi"
)

// wifiSSID is the network of the image test's wifi.txt, one the emulated
// Pi never joins: QEMU's raspi3b has no radio.
const wifiSSID = "fencegate test"

// wifiText is the card's wifi.txt, as Notepad writes it.
func wifiText(pass string) string {
	return "# the image test's Wi-Fi\r\ncountry: DE\r\nssid: " + wifiSSID + "\r\npassphrase: " + pass + "\r\n"
}

// checkWiFi checks what the first boot made of the card's wifi.txt on a
// Pi without a radio: wpa_supplicant's configuration for root alone, with
// the SSID in hex and the derived key, not the passphrase; wifi.txt gone
// from the folder; status.txt saying what was set up and, from
// fencegate-netstatus (which the gateway did not wait for), the addresses
// and that there is no wlan0; no wpa_supplicant started, nothing failed.
func checkWiFi(ctx context.Context, t *testing.T, pi *pi, pass string) {
	t.Helper()
	start := time.Now()
	status := pi.waitFor(ctx, "cat /boot/firmware/fencegate/status.txt", regexp.MustCompile(`(?m)^Wi-Fi: no wlan0.*\r$`))
	for _, want := range []string{
		"\r\nWi-Fi: \"" + wifiSSID + "\", country DE, WPA2-Personal (the Wi-Fi: line below says whether the Pi joined)\r\n",
		"\r\nWi-Fi: no wlan0: this Pi has no radio that Linux found",
	} {
		if !strings.Contains(status, want) {
			t.Errorf("status.txt does not say %q:\n%s\nthe radio driver's messages:\n%s", want, status, pi.must("dmesg | grep -i brcm; true"))
		}
	}
	if !regexp.MustCompile(`(?m)^network: .*\b\d+\.\d+\.\d+\.\d+\b.*\r$`).MatchString(status) {
		t.Errorf("status.txt has no network: line with the Pi's address:\n%s", status)
	}
	n, err := wifi.Parse("wifi.txt", []byte(wifiText(pass)))
	if err != nil {
		t.Fatal(err)
	}
	const conf = "/etc/wpa_supplicant/wpa_supplicant-wlan0.conf"
	got := pi.must("stat -c '%U:%G %a' " + conf + "; cat " + conf)
	for _, want := range []string{"root:root 600\n", "\tssid=" + hex.EncodeToString([]byte(wifiSSID)) + "\n", "country=DE\n", fmt.Sprintf("\tpsk=%x\n", n.PSK)} {
		if !strings.Contains(got, want) {
			t.Errorf("%s: want %q:\n%s", conf, want, got)
		}
	}
	if strings.Contains(got, pass) {
		t.Errorf("%s holds the passphrase:\n%s", conf, got)
	}
	if left := pi.must("ls /boot/firmware/fencegate"); regexp.MustCompile(`(?m)^wifi\.txt$`).MatchString(left) {
		t.Errorf("wifi.txt is still in the folder after the first boot:\n%s", left)
	}
	// No wlan0, so no wpa_supplicant (nor wpasupplicant's D-Bus one); the
	// status unit done, not failed; the gateway not ordered after it.
	units := pi.must("systemctl is-active wpa_supplicant@wlan0 wpa_supplicant; systemctl show fencegate-netstatus -p ActiveState -p SubState -p Result; true")
	// systemctl show prints the properties in its own order, not the asked one.
	for _, want := range []string{"inactive\ninactive\n", "ActiveState=active\n", "SubState=exited\n", "Result=success\n"} {
		if !strings.Contains(units, want) {
			t.Errorf("want %q:\n%s", want, units)
		}
	}
	if after := pi.must("systemctl show fencegate -p After --value"); strings.Contains(after, "fencegate-netstatus") {
		t.Errorf("the gateway is ordered after fencegate-netstatus, and waits for the network's status: After=%s", after)
	}
	if failed := pi.must("systemctl list-units --failed --plain --no-legend"); strings.Contains(failed, "wpa_supplicant") || strings.Contains(failed, "netstatus") {
		t.Errorf("failed units:\n%s", failed)
	}
	t.Logf("Wi-Fi from the card: checked in %v", time.Since(start).Round(100*time.Millisecond))
}
