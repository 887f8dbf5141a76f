package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWiFi: gateway wifi checks a wifi.txt, writes wpa_supplicant's
// configuration with mode 0600 and without the passphrase, prints one line
// that names the network and never its secret, and refuses a bad file with
// exit 78, naming the line, leaving the old configuration as it was.
func TestWiFi(t *testing.T) {
	dir := t.TempDir()
	from := filepath.Join(dir, "wifi.txt")
	out := filepath.Join(dir, "wpa_supplicant-wlan0.conf")
	const pass = "not-in-any-output-42"
	write := func(text string) {
		t.Helper()
		if err := os.WriteFile(from, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("\xEF\xBB\xBFcountry: DE\r\nssid: greenhouse\r\npassphrase: " + pass + "\r\n")

	got, code := runCLI(t, "wifi", "--from", from)
	if code != 0 || got != from+": ok: \"greenhouse\", country DE, WPA2-Personal\n" {
		t.Fatalf("gateway wifi (check): exit %d\n%s", code, got)
	}
	if _, err := os.Stat(out); err == nil {
		t.Fatal("gateway wifi without --out wrote a configuration")
	}
	got, code = runCLI(t, "wifi", "--from", from, "--out", out)
	if code != 0 || got != from+": ok: \"greenhouse\", country DE, WPA2-Personal; wrote "+out+"\n" {
		t.Fatalf("gateway wifi: exit %d\n%s", code, got)
	}
	cfg, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(out)
	if st.Mode().Perm() != 0o600 || !strings.Contains(string(cfg), "\tssid=677265656e686f757365\n") || !strings.Contains(string(cfg), "country=DE\n") ||
		strings.Contains(string(cfg), pass) || strings.Contains(got, pass) {
		t.Fatalf("mode %v, configuration:\n%s", st.Mode(), cfg)
	}

	// Refused: the old configuration stays, exit 78, the line named, the
	// passphrase quoted nowhere.
	write("country: DE\nssid: greenhouse\npassphrase: " + pass + "\nhidden: maybe\n")
	got, code = runCLI(t, "wifi", "--from", from, "--out", out)
	if code != 78 || !strings.Contains(got, from+", line 4: hidden: want yes or no") || strings.Contains(got, pass) {
		t.Errorf("gateway wifi with hidden: maybe: exit %d, want 78 naming line 4, without the passphrase:\n%s", code, got)
	}
	if now, _ := os.ReadFile(out); string(now) != string(cfg) {
		t.Errorf("a refused wifi.txt changed the configuration:\n%s", now)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 2 {
		t.Errorf("the directory holds %v; want wifi.txt and the configuration", ents)
	}

	// WPA2-Enterprise without its CA file next to wifi.txt: refused.
	write("country: DE\nssid: corp\neap: peap\nidentity: me\npassword: " + pass + "\nca: corp-ca.pem\n")
	got, code = runCLI(t, "wifi", "--from", from, "--out", out)
	if code != 78 || !strings.Contains(got, filepath.Join(dir, "corp-ca.pem")+": not found") || strings.Contains(got, pass) {
		t.Errorf("gateway wifi without the CA file: exit %d, want 78:\n%s", code, got)
	}

	for _, args := range [][]string{{"wifi"}, {"wifi", "--out", out}, {"wifi", "--from", from, "extra"}, {"wifi", "--nope"}} {
		if got, code := runCLI(t, args...); code != 64 {
			t.Errorf("gateway %s: exit %d, want 64\n%s", strings.Join(args, " "), code, got)
		}
	}
	if got, code := runCLI(t, "wifi", "--from", filepath.Join(dir, "none.txt")); code != 78 || !strings.Contains(got, "none.txt") {
		t.Errorf("gateway wifi --from a missing file: exit %d, want 78\n%s", code, got)
	}
}

// TestWiFiReports: what gateway wifi says of a bad file goes to the
// card's status.txt: a key it does not take is not quoted (the line may
// be a passphrase), a UTF-16 file is one line, and a file of nonsense
// gives the first 10 problems and how many more, not one line each.
func TestWiFiReports(t *testing.T) {
	dir := t.TempDir()
	from := filepath.Join(dir, "wifi.txt")
	for _, tt := range []struct {
		name, in string
		want     string // the whole output
	}{
		{"a key not shown", "country: DE\nssid: a\nopen: yes\nSup3r:Secret!\n",
			"gateway: " + from + `, line 4: unknown key (not shown: the line may be a passphrase); the keys are country, ssid, hidden, passphrase, open, eap, identity, anonymous_identity, password, ca, phase2, each followed by ':' ("ssid: MyNetwork")` + "\n"},
		{"UTF-16", "\xff\xfec\x00o\x00\r\x00\n\x00s\x00\r\x00\n\x00",
			"gateway: " + from + `: saved as UTF-16 ("Unicode"): save it as UTF-8 (Notepad: Save as, Encoding UTF-8)` + "\n"},
	} {
		if err := os.WriteFile(from, []byte(tt.in), 0o600); err != nil {
			t.Fatal(err)
		}
		if got, code := runCLI(t, "wifi", "--from", from); code != 78 || got != tt.want {
			t.Errorf("%s: exit %d\n%s\nwant exit 78\n%s", tt.name, code, got, tt.want)
		}
	}
	// 64 KiB of x lines: 32768 problems of the lines, 3 of the file.
	if err := os.WriteFile(from, []byte(strings.Repeat("x\n", 32<<10)), 0o600); err != nil {
		t.Fatal(err)
	}
	got, code := runCLI(t, "wifi", "--from", from)
	lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
	if code != 78 || len(lines) != 11 || !strings.HasPrefix(lines[0], "gateway: "+from+", line 1: no ':'") ||
		lines[10] != from+": and 32761 more problems, not shown (mend these first)" {
		t.Errorf("64 KiB of x lines: exit %d, %d lines (%d bytes); want 78, 11 lines:\n%s", code, len(lines), len(got), strings.Join(lines[:min(len(lines), 15)], "\n"))
	}
}

// TestWiFiOff: a wifi.txt whose one line is off says so and exits 0; with
// --out it removes the configuration and its CA file, and says which.
func TestWiFiOff(t *testing.T) {
	dir := t.TempDir()
	from := filepath.Join(dir, "wifi.txt")
	out := filepath.Join(dir, "wpa_supplicant-wlan0.conf")
	ca := filepath.Join(dir, "wpa_supplicant-wlan0-ca.pem")
	if err := os.WriteFile(from, []byte("# no Wi-Fi\r\noff\r\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, code := runCLI(t, "wifi", "--from", from); code != 0 || got != from+": off: Wi-Fi off\n" {
		t.Errorf("gateway wifi (check) of off: exit %d\n%s", code, got)
	}
	for _, p := range []string{out, ca} {
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if got, code := runCLI(t, "wifi", "--from", from, "--out", out); code != 0 || got != from+": off: Wi-Fi off; removed "+out+" and "+ca+"\n" {
		t.Errorf("gateway wifi --out of off: exit %d\n%s", code, got)
	}
	for _, p := range []string{out, ca} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s is still there", p)
		}
	}
	if got, code := runCLI(t, "wifi", "--from", from, "--out", out); code != 0 || got != from+": off: Wi-Fi off; no "+out+" to remove\n" {
		t.Errorf("gateway wifi --out of off, again: exit %d\n%s", code, got)
	}
	// off and a network: refused, nothing removed.
	if err := os.WriteFile(out, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(from, []byte("off\ncountry: DE\nssid: a\nopen: yes\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, code := runCLI(t, "wifi", "--from", from, "--out", out); code != 78 || !strings.Contains(got, from+", line 1: off turns Wi-Fi off and stands alone") {
		t.Errorf("gateway wifi of off and a network: exit %d\n%s", code, got)
	}
	if _, err := os.Stat(out); err != nil {
		t.Errorf("a refused file removed the configuration: %v", err)
	}
}
