//go:build linux

package piimage

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Stubs of the programs netstatus asks, answering from FAKE_ files.
var netstatusStubs = map[string]string{
	// ip -o addr show [dev IF] [-4] scope global: "2: IF FAMILY ADDR/LEN ..."
	"ip": `dev="" fam=""
while [ $# -gt 0 ]; do case $1 in dev) dev=$2; shift ;; -4) fam=inet ;; esac; shift; done
while read -r i f a; do
	[ -n "$dev" ] && [ "$i" != "$dev" ] && continue
	[ -n "$fam" ] && [ "$f" != "$fam" ] && continue
	echo "2: $i    $f $a scope global dynamic $i"
done <"$FAKE_ADDRS"`,
	"wpa_cli":    `[ -n "$FAKE_STATE" ] || exit 1; printf 'bssid=00:11:22:33:44:55\nwpa_state=%s\n' "$FAKE_STATE"`,
	"systemctl":  `case "$*" in is-active*) [ "$FAKE_ACTIVE" = yes ] ;; show*) echo 0123456789abcdef ;; esac`,
	"journalctl": `case "$*" in *_SYSTEMD_INVOCATION_ID=0123456789abcdef*) cat "$FAKE_LOG" ;; esac`,
	"dmesg":      `cat "$FAKE_DMESG"`,
}

// TestNetstatus: fencegate-netstatus appends to status.txt, in its CRLF
// lines, each interface's addresses and, with Wi-Fi set up, whether the
// Pi joined or why not, as wpa_supplicant, the kernel and the addresses
// tell it; and it ends as soon as the answer is known.
func TestNetstatus(t *testing.T) {
	const (
		conf      = "# Written by gateway wifi\n# ssid: \"greenhouse\"\nctrl_interface=/run/wpa_supplicant\n"
		eth       = "eth0 inet 10.0.2.15/24\neth0 inet6 fd00::15/64\n"
		wlanAddr  = "wlan0 inet 192.168.1.40/24\n"
		zero2     = "brcmfmac: F1 signature read @0x18000000=0x1542a9a6\nbrcmfmac: brcmf_fw_alloc_request: using brcm/brcmfmac43430b0-sdio for chip BCM43430/2\n"
		wrongKey  = "wlan0: WPA: 4-Way Handshake failed - pre-shared key may be incorrect\nwlan0: CTRL-EVENT-SSID-TEMP-DISABLED id=0 ssid=\"greenhouse\" auth_failures=1 duration=10 reason=WRONG_KEY\n"
		eapFailed = "wlan0: CTRL-EVENT-EAP-FAILURE EAP authentication failed\n"
	)
	for _, tt := range []struct {
		name             string
		wifi             bool // a configuration
		wlan0            bool
		addrs, state     string
		active           bool
		log, dmesg, want string
		wait             string // FENCEGATE_NETSTATUS_WAIT; "0": the time is up at once
		ssid             string // the configuration's quoted SSID, if not "greenhouse"
		quick            bool   // done at once with a wait of 90 s
	}{
		{name: "no Wi-Fi", addrs: eth, want: "network: eth0 10.0.2.15 fd00::15", wait: "90", quick: true},
		{name: "no Wi-Fi, no address", want: "network: eth0 (no address)", wait: "0"},
		{name: "no radio", wifi: true, addrs: eth, want: "network: eth0 10.0.2.15 fd00::15\r\nWi-Fi: no wlan0: this Pi has no radio that Linux found", wait: "90", quick: true},
		{name: "Zero 2 W radio variant", wifi: true, addrs: eth, dmesg: zero2, want: "Wi-Fi: no wlan0: this radio is the BCM43430/2 variant (some Raspberry Pi Zero 2 W)", wait: "0"},
		{name: "other firmware trouble", wifi: true, dmesg: "brcmfmac: brcmf_fw_alloc_request: using brcm/brcmfmac43455-sdio for chip BCM4345/6\n",
			want: "Wi-Fi: no wlan0: the radio (BCM4345/6) did not start", wait: "0"},
		{name: "joined", wifi: true, wlan0: true, addrs: wlanAddr, state: "COMPLETED", active: true,
			want: "network: eth0 (no address), wlan0 192.168.1.40\r\nWi-Fi: joined \"greenhouse\" as 192.168.1.40", wait: "90", quick: true},
		{name: "joined, a name with backslashes", wifi: true, wlan0: true, addrs: wlanAddr, state: "COMPLETED", active: true, ssid: `"g\\h\"\\c"`,
			want: `Wi-Fi: joined "g\\h\"\\c" as 192.168.1.40`, wait: "0"},
		{name: "wrong passphrase", wifi: true, wlan0: true, addrs: eth, state: "SCANNING", active: true, log: wrongKey,
			want: "Wi-Fi: not joined: \"greenhouse\" refused the key: wrong passphrase", wait: "0"},
		{name: "EAP refused", wifi: true, wlan0: true, state: "DISCONNECTED", active: true, log: eapFailed,
			want: "Wi-Fi: not joined: \"greenhouse\" refused the identity or password", wait: "0"},
		{name: "not found", wifi: true, wlan0: true, addrs: eth, state: "SCANNING", active: true,
			want: "Wi-Fi: not joined: network \"greenhouse\" not found in 0 s", wait: "0"},
		{name: "no DHCP", wifi: true, wlan0: true, state: "COMPLETED", active: true,
			want: "Wi-Fi: joined \"greenhouse\", but no address came by DHCP", wait: "0"},
		{name: "wpa_supplicant not running", wifi: true, wlan0: true, want: "Wi-Fi: not joined: wpa_supplicant is not running for wlan0", wait: "0"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			card := filepath.Join(dir, "fencegate")
			net := filepath.Join(dir, "net")
			bin := filepath.Join(dir, "bin")
			for _, d := range []string{card, bin, filepath.Join(net, "lo"), filepath.Join(net, "eth0")} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			if tt.wlan0 {
				os.Mkdir(filepath.Join(net, "wlan0"), 0o755)
			}
			for name, body := range netstatusStubs {
				if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			write := func(name, text string) string {
				p := filepath.Join(dir, name)
				if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
					t.Fatal(err)
				}
				return p
			}
			wpaConf := filepath.Join(dir, "wpa.conf")
			if tt.wifi {
				c := conf
				if tt.ssid != "" {
					c = strings.Replace(c, `"greenhouse"`, tt.ssid, 1)
				}
				write("wpa.conf", c)
			}
			const before = "fencegate-bootconfig, ...\r\n\r\nthe gateway starts\r\n"
			write("fencegate/status.txt", before)
			active := map[bool]string{true: "yes"}[tt.active]
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, "sh", filepath.Join(imageLib, "netstatus"))
			cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "FENCEGATE_CARD="+card, "FENCEGATE_WPA_CONF="+wpaConf,
				"FENCEGATE_NET="+net, "FENCEGATE_NETSTATUS_WAIT="+tt.wait, "FENCEGATE_NETSTATUS_RADIO_WAIT=0",
				"FAKE_ADDRS="+write("addrs", tt.addrs), "FAKE_STATE="+tt.state, "FAKE_ACTIVE="+active,
				"FAKE_LOG="+write("log", tt.log), "FAKE_DMESG="+write("dmesg", tt.dmesg))
			start := time.Now()
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("netstatus: %v\n%s", err, out)
			}
			if took := time.Since(start); tt.quick && took > 10*time.Second {
				t.Errorf("netstatus took %v; the answer was known at once", took)
			}
			b, _ := os.ReadFile(filepath.Join(card, "status.txt"))
			status := string(b)
			after, ok := strings.CutPrefix(status, before+"\r\n")
			if !ok || !strings.Contains(after, tt.want) {
				t.Fatalf("status.txt:\n%q\nwant it to go on, after a blank line, with %q", status, tt.want)
			}
			lines := strings.Split(strings.TrimSuffix(after, "\r\n"), "\r\n")
			if !strings.HasPrefix(lines[0], "network: ") || len(lines) != map[bool]int{true: 2, false: 1}[tt.wifi] ||
				strings.Count(after, "\n") != strings.Count(after, "\r\n") || !strings.HasSuffix(after, "\r\n") {
				t.Errorf("want a network: line and, with Wi-Fi, one Wi-Fi: line, CRLF each:\n%q", after)
			}
			for _, l := range lines {
				if !strings.Contains(string(out), "fencegate: "+l+"\n") {
					t.Errorf("the console lacks %q:\n%s", l, out)
				}
			}
		})
	}
}
