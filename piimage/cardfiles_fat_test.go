//go:build linux

package piimage

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fencegate/fencegate/tests/testenv"
)

// TestCardUnknownFAT: card_unknown on a real FAT, with the files written by
// mtools as a laptop writes them. FAT's names ignore case (and keep it), so
// bootconfig's [ -f "$CARD/gateway.yaml" ] finds Gateway.yaml and takes it:
// a name the Pi takes in other capitals (Gateway.yaml, HOSTNAME.TXT, KEYS,
// and passwd, which fusefat shows as PASSWD) is not listed as not taken;
// other near misses are, and a private key is overwritten off the card.
// Mounted as TestShredCardFile mounts it (Linux's vfat, or fusefat); it
// needs root, and skips without, or fails under CI.
func TestCardUnknownFAT(t *testing.T) {
	mkfs := testenv.Program(t, "mkfs.fat")
	testenv.Program(t, "mcopy")
	testenv.Need(t, os.Geteuid() == 0, "mounting a FAT image needs root")
	tag := fmt.Sprintf("%x", rand.Uint64())
	key := "-----BEGIN OPENSSH PRIVATE KEY-----\nKEY-" + tag + "\n-----END OPENSSH PRIVATE KEY-----\n"
	files := map[string]string{
		"Gateway.yaml": "id: refused\n", "HOSTNAME.TXT": "greenhouse\n", "passwd": "c:pw\n", "KEYS/ctl.pub": signPub,
		"README.txt": "", "gateway.yaml.example": "", "._gateway.yaml": "", ".DS_Store": "",
		"gateway (1).yaml": "id: a\n", "Gateway.yml": "id: a\n", "store.txt.example.txt": "new\n", "id_ed25519": key,
	}
	want := []string{
		meant("gateway (1).yaml", "gateway.yaml"), meant("Gateway.yml", "gateway.yaml"),
		meant("store.txt.example.txt", "store.txt"), privateKey("id_ed25519", sshToKeys),
	}
	slices.Sort(want)
	var why []string
	ran := 0
	for _, d := range fatDrivers {
		t.Run(d.name, func(t *testing.T) {
			dir := t.TempDir()
			img := filepath.Join(dir, "card.img")
			if out, err := exec.Command(mkfs, "-n", "RASPIFIRM", "-F", "32", "-S", "512", "-s", "4", "-C", img, "262144").CombinedOutput(); err != nil {
				t.Fatalf("mkfs.fat: %v\n%s", err, out)
			}
			mtools := func(args ...string) {
				t.Helper()
				if out, err := exec.Command(args[0], append([]string{"-i", img}, args[1:]...)...).CombinedOutput(); err != nil {
					t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
				}
			}
			mtools("mmd", "::fencegate", "::fencegate/KEYS")
			for name, text := range files {
				src := filepath.Join(dir, "src")
				if err := os.WriteFile(src, []byte(text), 0o600); err != nil {
					t.Fatal(err)
				}
				mtools("mcopy", "-o", src, "::fencegate/"+name)
			}
			mnt := filepath.Join(dir, "mnt")
			os.Mkdir(mnt, 0o700)
			unmount, _, err := d.mount(t, img, mnt)
			var u unavailable
			if errors.As(err, &u) {
				why = append(why, d.name+": "+u.why)
				t.Skip(u.why)
			}
			if err != nil {
				t.Fatal(err)
			}
			ran++
			folder := filepath.Join(mnt, find(t, mnt, "fencegate"))
			// What bootconfig's has and [ -d ] see.
			for _, name := range []string{"gateway.yaml", "hostname.txt", "passwd", "keys"} {
				if _, err := os.Stat(filepath.Join(folder, name)); err != nil {
					t.Errorf("%s does not find %s under the Pi's name %s (%v): FAT's names should ignore case", d.name, strings.ToUpper(name), name, err)
				}
			}
			lines := runCardUnknown(t, folder)
			if len(lines) > 0 && lines[len(lines)-1] == takesOnly {
				lines = lines[:len(lines)-1]
			} else {
				t.Errorf("status.txt does not end with the names the Pi takes")
			}
			slices.Sort(lines)
			if !slices.Equal(lines, want) {
				t.Errorf("status.txt got\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
			}
			if _, err := os.Stat(filepath.Join(folder, "id_ed25519")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("id_ed25519 is still on the card (%v)", err)
			}
			for _, name := range []string{"Gateway.yaml", "gateway (1).yaml", "Gateway.yml"} {
				if _, err := os.Stat(filepath.Join(folder, name)); err != nil {
					t.Errorf("%s is gone from the card: card_unknown acted on a file it does not take (%v)", name, err)
				}
			}
			unmount()
			if imageHas(t, img, "KEY-"+tag) {
				t.Errorf("the private key's bytes are on the image after card_unknown removed it (%s)", d.name)
			}
		})
	}
	if ran == 0 && len(why) > 0 {
		testenv.Need(t, false, "no FAT driver to mount the card's image with: %s", strings.Join(why, "; "))
	}
}
