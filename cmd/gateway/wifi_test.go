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
