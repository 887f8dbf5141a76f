package wifi

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "wpa_supplicant-wlan0.conf")
	ca := filepath.Join(dir, "wpa_supplicant-wlan0-ca.pem")
	if CAPath(conf) != ca {
		t.Fatalf("CAPath = %s, want %s", CAPath(conf), ca)
	}
	cert, _ := testCert(t)
	ent, err := Parse("wifi.txt", []byte("country: DE\nssid: corp\neap: peap\nidentity: a\npassword: b\nca: c.pem\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := ent.Write(conf, nil); err == nil {
		t.Error("an Enterprise network was written without its CA")
	}
	if err := ent.Write(conf, cert); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{conf, ca} {
		st, err := os.Stat(p)
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v, mode %v; want 0600", p, err, st.Mode())
		}
	}
	if b, _ := os.ReadFile(conf); !strings.Contains(string(b), `ca_cert="`+ca+`"`) {
		t.Errorf("the configuration does not name %s:\n%s", ca, b)
	}
	// A Personal network after it: the CA file goes, nothing temporary stays.
	pers, err := Parse("wifi.txt", []byte("country: DE\nssid: home\npassphrase: abcdefgh\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(conf, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := pers.Write(conf, nil); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 || ents[0].Name() != "wpa_supplicant-wlan0.conf" {
		t.Errorf("after a Personal network the directory holds %v; want the configuration alone", ents)
	}
	if st, _ := os.Stat(conf); st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v after replacing a 0644 file; want 0600", st.Mode())
	}
	if err := pers.Write(filepath.Join(dir, "missing", "x.conf"), nil); err == nil {
		t.Error("Write into a missing directory succeeded")
	}
}

// TestRemove: Remove takes the configuration away, and its CA file, and
// says which it removed; nothing there is no error.
func TestRemove(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "wpa_supplicant-wlan0.conf")
	other := filepath.Join(dir, "wpa_supplicant.conf")
	for _, p := range []string{conf, CAPath(conf), other} {
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := Remove(conf); err != nil || strings.Join(got, " ") != conf+" "+CAPath(conf) {
		t.Fatalf("Remove = %v, %v", got, err)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 || ents[0].Name() != "wpa_supplicant.conf" {
		t.Errorf("after Remove the directory holds %v", ents)
	}
	if err := os.WriteFile(conf, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := Remove(conf); err != nil || strings.Join(got, " ") != conf {
		t.Errorf("Remove without a CA file = %v, %v", got, err)
	}
	if got, err := Remove(conf); err != nil || len(got) != 0 {
		t.Errorf("Remove of nothing = %v, %v", got, err)
	}
	if _, err := Remove(filepath.Join(dir, "missing", "x.conf")); err != nil {
		t.Errorf("Remove in a missing directory: %v", err)
	}
}
