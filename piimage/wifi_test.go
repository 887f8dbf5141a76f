//go:build linux

package piimage

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencegate/fencegate/tests/testenv"
	"github.com/fencegate/fencegate/wifi"
)

var gatewayOnce struct {
	sync.Once
	path string
	err  error
}

// gatewayBinary builds cmd/gateway once for the tests that run the
// image's scripts with it.
func gatewayBinary(t *testing.T) string {
	t.Helper()
	gatewayOnce.Do(func() {
		dir, err := os.MkdirTemp("", "piimage-gateway")
		if err != nil {
			gatewayOnce.err = err
			return
		}
		gatewayOnce.path = filepath.Join(dir, "gateway")
		gatewayOnce.err = testenv.GoBuild("gateway.test", gatewayOnce.path, "../cmd/gateway")
	})
	if gatewayOnce.err != nil {
		t.Fatal(gatewayOnce.err)
	}
	return gatewayOnce.path
}

// testCACert returns a self-signed CA certificate, as PEM.
func testCACert(t *testing.T) []byte {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "corp CA"}, IsCA: true, BasicConstraintsValid: true,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// wifiRun is one run of card_wifi: the card's folder, the Pi's files and
// what it said.
type wifiRun struct {
	folder, conf, net string
	status, stderr    string
	systemctl         string // the arguments systemctl was called with
}

// wifiPi is the Pi that card_wifi runs on.
type wifiPi struct {
	wlan0   bool   // its network-interface folder has wlan0
	noEtc   bool   // the configuration's folder is missing
	conf    string // the configuration there before, if not empty (and a CA file beside it)
	gateway string // a stand-in for gateway, if not empty: a shell script
}

// runCardWiFi runs bootconfig's card_wifi, as bootconfig sources it, on
// folder, with the gateway built from this tree, a stub systemctl, and a
// network-interface folder that has wlan0 if wlan0 is true; noEtc: the
// configuration's folder is missing.
func runCardWiFi(t *testing.T, folder string, wlan0, noEtc bool) *wifiRun {
	t.Helper()
	return runCardWiFiOn(t, folder, wifiPi{wlan0: wlan0, noEtc: noEtc})
}

// runCardWiFiOn runs card_wifi on folder and the Pi pi.
func runCardWiFiOn(t *testing.T, folder string, pi wifiPi) *wifiRun {
	t.Helper()
	wlan0, noEtc := pi.wlan0, pi.noEtc
	lib, err := filepath.Abs(imageLib)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	r := &wifiRun{folder: folder, conf: filepath.Join(dir, "etc", "wpa_supplicant-wlan0.conf"), net: filepath.Join(dir, "net")}
	for _, d := range []string{filepath.Dir(r.conf), r.net, filepath.Join(dir, "bin")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if wlan0 {
		os.Mkdir(filepath.Join(r.net, "wlan0"), 0o755)
	}
	if noEtc {
		os.Remove(filepath.Dir(r.conf))
	}
	if pi.conf != "" {
		for _, p := range []string{r.conf, wifi.CAPath(r.conf)} {
			if err := os.WriteFile(p, []byte(pi.conf), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	gateway := gatewayBinary(t)
	if pi.gateway != "" {
		gateway = filepath.Join(dir, "bin", "gateway")
		if err := os.WriteFile(gateway, []byte("#!/bin/sh\n"+pi.gateway), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	calls := filepath.Join(dir, "systemctl.calls")
	stub := "#!/bin/sh\necho \"$@\" >>" + calls + "\n"
	if err := os.WriteFile(filepath.Join(dir, "bin", "systemctl"), []byte(stub), 0o755); err != nil {
		t.Fatal(err)
	}
	status := filepath.Join(dir, "status")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", `set -u
eval "$(sed -n '/^say() {/p; /^refuse() {/p; /^has() {/p; /^clean() {/p; /^off_card() {/,/^}/p' "$1/bootconfig")"
for f in say refuse has clean off_card; do command -v $f >/dev/null || { echo "no $f in bootconfig" >&2; exit 3; }; done
. "$1/shred.sh"
. "$1/wifi.sh"
. "$1/cardfiles.sh"
card_wifi`, "sh", lib)
	cmd.Env = append(os.Environ(), "CARD="+folder, "STATUS_NEW="+status, "PATH="+filepath.Join(dir, "bin")+":"+os.Getenv("PATH"),
		"FENCEGATE_WPA_CONF="+r.conf, "FENCEGATE_NET="+r.net, "FENCEGATE_GATEWAY="+gateway)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("card_wifi: %v\n%s%s", err, stdout.String(), stderr.String())
	}
	b, _ := os.ReadFile(status)
	r.status, r.stderr = string(b), stderr.String()
	c, _ := os.ReadFile(calls)
	r.systemctl = string(c)
	return r
}

// TestCardWiFi: bootconfig's card_wifi writes wpa_supplicant's
// configuration from the card's wifi.txt, says so, and takes wifi.txt off
// the card, applied or refused, and the CA file it names if it was
// applied (never a file of the card's own, nor an example); it restarts
// wpa_supplicant@wlan0 only for a new configuration on a Pi that has
// wlan0. Every file left on the card is as it was.
func TestCardWiFi(t *testing.T) {
	const pass = "card-wifi-secret-1"
	cert := testCACert(t)
	for _, tt := range []struct {
		name    string
		files   map[string]string
		wlan0   bool
		status  []string // each in status.txt
		conf    []string // each in the configuration; nil: none written
		left    []string // the folder's files after it
		restart bool
	}{
		{"personal, no radio", map[string]string{"wifi.txt": "\xEF\xBB\xBFcountry: DE\r\nssid: greenhouse\r\npassphrase: " + pass + "\r\n"}, false,
			[]string{`Wi-Fi: "greenhouse", country DE, WPA2-Personal (the Wi-Fi: line below says whether the Pi joined)`},
			[]string{"\tssid=" + hex.EncodeToString([]byte("greenhouse")) + "\n", "country=DE\n"}, nil, false},
		{"personal, wlan0", map[string]string{"wifi.txt": "country: DE\nssid: greenhouse\npassphrase: " + pass + "\n"}, true,
			[]string{`Wi-Fi: "greenhouse", country DE, WPA2-Personal`}, []string{"psk="}, nil, true},
		{"refused", map[string]string{"wifi.txt": "country: DE\nssid: greenhouse\npassphrase: " + pass + "\nhidden: maybe\n", "README.txt": "x"}, true,
			[]string{"ERROR: wifi.txt is not valid, so Wi-Fi stays as it was; the file was removed from the card all the same",
				"\n  fencegate/wifi.txt, line 4: hidden: want yes or no\n"}, nil, []string{"README.txt"}, false},
		{"enterprise with its CA", map[string]string{"wifi.txt": "country: GB\nssid: corp\neap: peap\nidentity: me\npassword: " + pass + "\nca: \"Corp-CA.pem\"\n",
			"Corp-CA.pem": string(cert)}, false,
			[]string{`Wi-Fi: "corp", country GB, WPA2-Enterprise (PEAP, MSCHAPV2)`}, []string{"eap=PEAP", `ca_cert="`}, nil, false},
		{"enterprise refused, its CA left for the mended file", map[string]string{"wifi.txt": "country: GB\nssid: corp\neap: tls\nidentity: me\npassword: " + pass + "\nca: corp-ca.pem\n",
			"corp-ca.pem": string(cert)}, false,
			[]string{"\n  fencegate/wifi.txt, line 3: eap: want peap or ttls", "\n  corp-ca.pem, the CA file that wifi.txt names, stays on the card for the mended wifi.txt\n"},
			nil, []string{"corp-ca.pem"}, false},
		{"refused with ca naming an example the card ships", map[string]string{"wifi.txt": "country: GB\nssid: corp\neap: peap\nidentity: me\npassword: " + pass + "\nca: gateway.yaml.example\n",
			"gateway.yaml.example": "# An example\nmqtt:\n  broker: tcp://127.0.0.1:1883\n"}, false,
			[]string{"gateway.yaml.example: no PEM certificate in it"}, nil, []string{"gateway.yaml.example"}, false},
		{"applied with ca naming an example", map[string]string{"wifi.txt": "country: GB\nssid: corp\neap: peap\nidentity: me\npassword: " + pass + "\nca: Corp-CA.Example\n",
			"Corp-CA.Example": string(cert)}, false,
			[]string{`Wi-Fi: "corp", country GB, WPA2-Enterprise (PEAP, MSCHAPV2)`}, []string{"eap=PEAP"}, []string{"Corp-CA.Example"}, false},
		{"refused for a CA file with a private key, which goes", map[string]string{"wifi.txt": "country: GB\nssid: corp\neap: peap\nidentity: me\npassword: " + pass + "\nca: corp-ca.pem\n",
			"corp-ca.pem": string(cert) + "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIA==\n-----END PRIVATE KEY-----\n"}, false,
			[]string{"corp-ca.pem: holds a private key", "\n  corp-ca.pem held a private key, so it was removed from the card all the same\n"}, nil, nil, false},
		{"the broker's ca.crt is left for the broker's part", map[string]string{"wifi.txt": "country: GB\nssid: corp\neap: ttls\nidentity: me\npassword: " + pass + "\nca: CA.CRT\n",
			"CA.CRT": string(cert)}, false,
			[]string{`Wi-Fi: "corp", country GB, WPA2-Enterprise (TTLS, MSCHAPV2)`}, []string{"eap=TTLS"}, []string{"CA.CRT"}, false},
		{"a name that is not a file name is not touched", map[string]string{"wifi.txt": "country: GB\nssid: corp\neap: ttls\nidentity: me\npassword: " + pass + "\nca: ../x\n",
			"x": "keep"}, false,
			[]string{"line 6: ca: want the name of a file"}, nil, []string{"x"}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			folder := filepath.Join(t.TempDir(), "fencegate")
			for name, text := range tt.files {
				put(t, folder, name, text)
			}
			r := runCardWiFi(t, folder, tt.wlan0, false)
			for _, w := range tt.status {
				if !strings.Contains(r.status, w) {
					t.Errorf("status.txt lacks %q:\n%s", w, r.status)
				}
			}
			if strings.Contains(r.status, pass) || r.stderr != "" {
				t.Errorf("status.txt shows the password, or stderr is not empty (%q):\n%s", r.stderr, r.status)
			}
			conf, err := os.ReadFile(r.conf)
			if tt.conf == nil {
				if err == nil {
					t.Errorf("a configuration was written:\n%s", conf)
				}
			} else {
				st, _ := os.Stat(r.conf)
				if err != nil || st.Mode().Perm() != 0o600 || strings.Contains(string(conf), pass) {
					t.Fatalf("configuration: %v, mode %v:\n%s", err, st.Mode(), conf)
				}
				for _, w := range tt.conf {
					if !strings.Contains(string(conf), w) {
						t.Errorf("the configuration lacks %q:\n%s", w, conf)
					}
				}
				if strings.Contains(string(conf), "eap=") {
					if ca, err := os.ReadFile(wifi.CAPath(r.conf)); err != nil || string(ca) != string(cert) {
						t.Errorf("the CA file beside the configuration: %v\n%s", err, ca)
					}
				}
			}
			es, _ := os.ReadDir(folder)
			var left []string
			for _, e := range es {
				left = append(left, e.Name())
				if b, _ := os.ReadFile(filepath.Join(folder, e.Name())); string(b) != tt.files[e.Name()] {
					t.Errorf("%s was changed on the card:\n%q", e.Name(), b)
				}
			}
			if strings.Join(left, " ") != strings.Join(tt.left, " ") {
				t.Errorf("the folder holds %v after card_wifi; want %v", left, tt.left)
			}
			if want := map[bool]string{true: "--no-block restart wpa_supplicant@wlan0.service\n"}[tt.restart]; r.systemctl != want {
				t.Errorf("systemctl called with %q; want %q", r.systemctl, want)
			}
		})
	}
	// The Pi's side fails (no /etc/wpa_supplicant): said, wifi.txt taken
	// off the card all the same, nothing restarted.
	folder := filepath.Join(t.TempDir(), "fencegate")
	put(t, folder, "wifi.txt", "country: DE\nssid: greenhouse\npassphrase: "+pass+"\n")
	r := runCardWiFi(t, folder, true, true)
	if !strings.Contains(r.status, "ERROR: Wi-Fi: gateway wifi failed (exit 1), so Wi-Fi stays as it was; wifi.txt was removed") ||
		!strings.Contains(r.status, "\n  --out ") || strings.Contains(r.status, pass) || r.systemctl != "" {
		t.Errorf("without /etc/wpa_supplicant: status.txt\n%s\nsystemctl %q", r.status, r.systemctl)
	}
	if _, err := os.Stat(filepath.Join(folder, "wifi.txt")); err == nil {
		t.Error("wifi.txt stayed on the card")
	}
	// Without wifi.txt nothing changes, and nothing is said.
	folder = filepath.Join(t.TempDir(), "fencegate")
	put(t, folder, "README.txt", "x")
	if r := runCardWiFi(t, folder, true, false); r.status != "" || r.systemctl != "" {
		t.Errorf("without wifi.txt: status %q, systemctl %q; want nothing", r.status, r.systemctl)
	}
}

// TestCardWiFiOff: a wifi.txt whose one line is off removes the
// configuration and its CA file, stops wpa_supplicant@wlan0 (not waiting
// for it), is taken off the card, and status.txt says so; on a Pi where
// Wi-Fi was never set up it says the same, and removes nothing.
func TestCardWiFiOff(t *testing.T) {
	for _, before := range []string{"# Written by gateway wifi\nnetwork={\n}\n", ""} {
		folder := filepath.Join(t.TempDir(), "fencegate")
		put(t, folder, "wifi.txt", "\xEF\xBB\xBF# Wi-Fi off: this Pi has a cable now\r\noff\r\n")
		put(t, folder, "README.txt", "x")
		r := runCardWiFiOn(t, folder, wifiPi{wlan0: true, conf: before})
		if r.status != "Wi-Fi: off (wifi.txt said off)\n" || r.stderr != "" {
			t.Errorf("status.txt %q, stderr %q", r.status, r.stderr)
		}
		for _, p := range []string{r.conf, wifi.CAPath(r.conf)} {
			if _, err := os.Stat(p); err == nil {
				t.Errorf("%s is still there", p)
			}
		}
		if es, _ := os.ReadDir(folder); len(es) != 1 || es[0].Name() != "README.txt" {
			t.Errorf("the folder holds %v; want README.txt alone", es)
		}
		if r.systemctl != "--no-block stop wpa_supplicant@wlan0.service\n" {
			t.Errorf("systemctl called with %q", r.systemctl)
		}
	}
	// off with a network besides: refused, taken off the card, the
	// configuration kept, nothing stopped.
	folder := filepath.Join(t.TempDir(), "fencegate")
	put(t, folder, "wifi.txt", "off\ncountry: DE\nssid: a\npassphrase: card-wifi-secret-2\n")
	r := runCardWiFiOn(t, folder, wifiPi{wlan0: true, conf: "kept\n"})
	if !strings.Contains(r.status, "\n  fencegate/wifi.txt, line 1: off turns Wi-Fi off and stands alone") || r.systemctl != "" || strings.Contains(r.status, "card-wifi-secret-2") {
		t.Errorf("off and a network: status.txt\n%s\nsystemctl %q", r.status, r.systemctl)
	}
	if b, err := os.ReadFile(r.conf); err != nil || string(b) != "kept\n" {
		t.Errorf("the configuration after a refused off: %q, %v", b, err)
	}
}

// TestCardWiFiReports: what card_wifi puts in status.txt is bounded: a
// 64 KiB wifi.txt of nonsense gives gateway wifi's first problems and
// their count; whatever the gateway prints, at most WIFI_SAID_MAX of its
// lines are copied, each cut short. A key wifi.txt does not take is not
// shown (the line may be a passphrase), and a UTF-16 file is said once.
func TestCardWiFiReports(t *testing.T) {
	status := func(t *testing.T, text string, pi wifiPi) string {
		t.Helper()
		folder := filepath.Join(t.TempDir(), "fencegate")
		put(t, folder, "wifi.txt", text)
		r := runCardWiFiOn(t, folder, pi)
		if r.stderr != "" {
			t.Errorf("stderr: %s", r.stderr)
		}
		return r.status
	}
	t.Run("64 KiB of x lines", func(t *testing.T) {
		got := status(t, strings.Repeat("x\n", 32<<10), wifiPi{})
		lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
		if len(lines) != 12 || !strings.HasPrefix(lines[1], "  fencegate/wifi.txt, line 1: no ':'") ||
			lines[11] != "  fencegate/wifi.txt: and 32761 more problems, not shown (mend these first)" {
			t.Errorf("%d lines, %d bytes:\n%s", len(lines), len(got), strings.Join(lines[:min(len(lines), 20)], "\n"))
		}
	})
	t.Run("a gateway that says too much", func(t *testing.T) {
		got := status(t, "x\n", wifiPi{gateway: `i=0; while [ $i -lt 100 ]; do echo "line $i"; i=$((i + 1)); done; head -c 3000 /dev/zero | tr '\0' y; echo; exit 78`})
		lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
		if len(lines) != 14 || lines[1] != "  line 0" || lines[12] != "  line 11" ||
			lines[13] != "  and 89 more lines: gateway wifi --from wifi.txt, on a laptop, says them all" {
			t.Errorf("%d lines:\n%s", len(lines), got)
		}
		got = status(t, "x\n", wifiPi{gateway: `head -c 3000 /dev/zero | tr '\0' y; echo; exit 78`})
		if lines := strings.Split(got, "\n"); len(lines) != 3 || lines[1] != "  "+strings.Repeat("y", 1000)+"..." {
			t.Errorf("a long line:\n%s", got)
		}
	})
	t.Run("a key not shown", func(t *testing.T) {
		got := status(t, "country: DE\r\nssid: a\r\nopen: yes\r\nSup3r:Secret!\r\n", wifiPi{})
		if !strings.Contains(got, "\n  fencegate/wifi.txt, line 4: unknown key (not shown: the line may be a passphrase); the keys are country, ssid,") ||
			strings.Contains(strings.ToLower(got), "sup3r") || strings.Contains(got, "Secret") {
			t.Errorf("status.txt:\n%s", got)
		}
	})
	t.Run("UTF-16", func(t *testing.T) {
		var u []byte
		for _, c := range []byte("country: DE\r\nssid: a\r\nopen: yes\r\n") {
			u = append(u, c, 0)
		}
		got := status(t, "\xff\xfe"+string(u), wifiPi{})
		if want := "\n  fencegate/wifi.txt: saved as UTF-16 (\"Unicode\"): save it as UTF-8 (Notepad: Save as, Encoding UTF-8)\n"; !strings.HasSuffix(got, want) || strings.Count(got, "\n") != 2 {
			t.Errorf("status.txt:\n%s\nwant it to end with%s", got, want)
		}
	})
}
