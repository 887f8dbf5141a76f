//go:build linux

package piimage

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"
)

// imageLib is the folder of bootconfig and the parts it sources.
const imageLib = "rootfs/usr/lib/fencegate-image"

// takesOnly is the line card_unknown ends with when it listed anything.
const takesOnly = "the Pi takes only these names from the fencegate folder: gateway.yaml, store.txt, passwd, acl, broker.crt, broker.key, ca.crt, keys/, authorized_keys, hostname.txt, wifi.txt, bridge.txt, site/ (README.txt there says what each is for)"

func notTaken(shown string) string {
	return `"` + shown + `": not a file the Pi takes, so it stays on the card`
}
func meant(shown, name string) string {
	return notTaken(shown) + ": did you mean " + name + "? (rename it and reboot)"
}
func backupOf(shown, name string) string {
	return notTaken(shown) + ": an editor's backup of " + name + "? Delete it (it may hold what " + name + " held)"
}
func signKey(shown string) string {
	return notTaken(shown) + ": a controller's public key? Put it in the keys folder and reboot"
}
func privateKey(shown, then string) string {
	return `WARNING: "` + shown + `" is a private key, which must never be on the card: the Pi overwrote and removed it (it needs only public keys; make a new key if the card was out of your hands)` + then
}

const (
	sshPub     = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOdTbd3e1z4w5wYd6Ck4XnHmGCDA+6gk4MEtz7Pm9n1Q me@laptop\n"
	signPub    = "ed25519:0c1Lh/Lg4Q6oW4wTRPVUyMMd8QmZsnOV2+2HIwQXySg=\n"
	opensshKey = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n-----END OPENSSH PRIVATE KEY-----\n"
	pemKey     = "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIFq0aXlR3sZ8pHk2QvJ0\n-----END PRIVATE KEY-----\n"
	sshToKeys  = "; for SSH, put its public half (the .pub file) in as authorized_keys"
)

// cardUnknownCases: a name left in the card's folder (a trailing / makes
// a folder), what it holds, and the status line card_unknown writes for it
// ("" for none); gone: it is a private key, overwritten and removed. The
// folder of this test minds case (unlike FAT: TestCardUnknownFAT).
var cardUnknownCases = []struct {
	name, text, want string
	gone             bool
}{
	// Notepad's .txt.
	{"gateway.yaml.txt", "id: a\n", `"gateway.yaml.txt": not a file the Pi takes, so it stays on the card: did you mean gateway.yaml? (rename it and reboot)`, false},
	{"authorized_keys.txt", sshPub, meant("authorized_keys.txt", "authorized_keys"), false},
	{"passwd.txt", "c:pw\n", meant("passwd.txt", "passwd"), false},
	{"hostname.txt.txt", "greenhouse\n", meant("hostname.txt.txt", "hostname.txt"), false},
	// An example copied, not renamed; a laptop's copy of a file.
	{"store.txt.example.txt", "new\n", meant("store.txt.example.txt", "store.txt"), false},
	{"passwd (2).example", "c:pw\n", meant("passwd (2).example", "passwd"), false},
	{"gateway (1).yaml", "id: a\n", meant("gateway (1).yaml", "gateway.yaml"), false},
	{"gateway - Copy.yaml", "id: a\n", meant("gateway - Copy.yaml", "gateway.yaml"), false},
	{"gateway copy 2.yaml", "id: a\n", meant("gateway copy 2.yaml", "gateway.yaml"), false},
	{"Copy of gateway.yaml", "id: a\n", meant("Copy of gateway.yaml", "gateway.yaml"), false},
	// Another case, .yml, no extension, white space around it.
	{"Gateway.yaml", "id: a\n", meant("Gateway.yaml", "gateway.yaml"), false},
	{"HOSTNAME.TXT", "greenhouse\n", meant("HOSTNAME.TXT", "hostname.txt"), false},
	{"Keys/", "", `"Keys/": not a folder the Pi takes, so it stays on the card: did you mean keys/? (rename it and reboot)`, false},
	{"gateway.yml", "id: a\n", meant("gateway.yml", "gateway.yaml"), false},
	{"Gateway.YML.txt", "id: a\n", meant("Gateway.YML.txt", "gateway.yaml"), false},
	{"hostname", "greenhouse\n", meant("hostname", "hostname.txt"), false},
	{"gateway", "id: a\n", meant("gateway", "gateway.yaml"), false},
	{"broker", "", notTaken("broker"), false}, // broker.crt or broker.key: no guess
	{"passwd ", "c:pw\n", meant("passwd ", "passwd"), false},
	// Public keys: SSH's are authorized_keys, a controller's go in keys/.
	{"authorized_keys.pub", sshPub, meant("authorized_keys.pub", "authorized_keys"), false},
	{"id_ed25519.pub", sshPub, meant("id_ed25519.pub", "authorized_keys"), false},
	{"my laptop", sshPub, meant("my laptop", "authorized_keys"), false},
	{"ctl-a.pub", signPub, signKey("ctl-a.pub"), false},
	{"ctl-b.txt", signPub, signKey("ctl-b.txt"), false},
	// Private keys: taken off the card, loudly.
	{"id_ed25519", opensshKey, privateKey("id_ed25519", sshToKeys), true},
	{"id_rsa (1)", "", privateKey("id_rsa (1)", sshToKeys), true},
	{"authorized_keys.txt", opensshKey, privateKey("authorized_keys.txt", sshToKeys), true},
	{"broker.key.txt", pemKey, privateKey("broker.key.txt", "; did you mean broker.key? Put it back under that name"), true},
	{"ctl-a.key", pemKey, privateKey("ctl-a.key", ""), true},
	{"broker.key~", pemKey, privateKey("broker.key~", ""), true},
	{"notes", "the broker's PRIVATE KEY is below\n", privateKey("notes", ""), true},
	{"laptop.ppk", "PuTTY-User-Key-File-3: ssh-ed25519\n", privateKey("laptop.ppk", sshToKeys), true},
	{"id_ed25519/", "", `"id_ed25519/": not a folder the Pi takes, so it stays on the card`, false},
	// Editors' backups and lock files.
	{"passwd~", "c:pw\n", backupOf("passwd~", "passwd"), false},
	{".passwd.swp", "c:pw\n", backupOf(".passwd.swp", "passwd"), false},
	{"#passwd#", "c:pw\n", backupOf("#passwd#", "passwd"), false},
	{"gateway.yaml.bak", "id: a\n", backupOf("gateway.yaml.bak", "gateway.yaml"), false},
	{".~lock.gateway.yaml#", "", backupOf(".~lock.gateway.yaml#", "gateway.yaml"), false},
	// Nothing like a name the Pi takes.
	{"notes.docx", "PK", notTaken("notes.docx"), false},
	{"ssh/", "", `"ssh/": not a folder the Pi takes, so it stays on the card`, false},
	// Left alone: the Pi's own, examples, and what it takes (a file it
	// refused stays, and its part said why).
	{"README.txt", "", "", false}, {"readme.TXT", "", "", false}, {"status.txt", "", "", false},
	{"wifi.txt.example", "", "", false}, {"Store.txt.Example", "", "", false},
	{"gateway.yaml", "id: a\n", "", false}, {"authorized_keys", "nothing\n", "", false},
	{"keys/", "", "", false}, {"site/", "", "", false},
	// Laptops' litter.
	{"._gateway.yaml", "", "", false}, {".DS_Store", "", "", false}, {".Spotlight-V100/", "", "", false},
	{".fseventsd/", "", "", false}, {".Trashes/", "", "", false}, {".Trash-1000/", "", "", false},
	{"System Volume Information/", "", "", false}, {"Thumbs.db", "", "", false}, {"desktop.ini", "", "", false},
	// A hostile laptop's names: one line each, escaped and shortened.
	{"a\nb", "", notTaken(`a\nb`), false},
	{"gateway.yaml\n", "id: a\n", meant(`gateway.yaml\n`, "gateway.yaml"), false},
	{"\r\x1b[2Jx\x7f", "", notTaken(`\r\x1b[2Jx\x7f`), false},
	{"tab\there", "", notTaken(`tab\there`), false},
	{"bad\xff\xe2\x82x", "", notTaken(`bad\xff\xe2\x82x`), false},
	{"overlong\xc0\xaf surrogate\xed\xa0\x80", "", notTaken(`overlong\xc0\xaf surrogate\xed\xa0\x80`), false},
	{"rlo\u202egpj.exe", "", notTaken(`rlo\u202Egpj.exe`), false},
	{"nbsp\u00a0zwsp\u200bbom\ufeff", "", notTaken(`nbsp\u00A0zwsp\u200Bbom\uFEFF`), false},
	{"café ünïcode 温室.txt", "", notTaken("café ünïcode 温室.txt"), false},
	{`q"\c %s $(reboot) ` + "`id`", "", notTaken(`q\"\\c %s $(reboot) ` + "`id`"), false},
	{"-n", "", notTaken("-n"), false},
	{strings.Repeat("x", 250), "", notTaken(strings.Repeat("x", 64) + "..."), false},
	{strings.Repeat("é", 127), "", notTaken(strings.Repeat("é", 64) + "..."), false},
	{strings.Repeat("\x01", 40), "", notTaken(strings.Repeat(`\x01`, 16) + "..."), false},
}

// TestCardUnknown: card_unknown, which bootconfig runs once its parts took
// their files, lists each name left in the card's folder that the Pi does
// not take, with the name it probably meant, in one line of status.txt
// whatever the name holds; it leaves such files as they are, but for a
// private key, which it overwrites and removes. Each case runs alone in a
// folder of its own, with bootconfig's own say and off_card.
func TestCardUnknown(t *testing.T) {
	for _, c := range cardUnknownCases {
		t.Run(strings.ToValidUTF8(strings.ReplaceAll(c.name, "/", "(dir)"), "?"), func(t *testing.T) {
			t.Parallel()
			folder := filepath.Join(t.TempDir(), "fencegate")
			put(t, folder, c.name, c.text)
			lines := runCardUnknown(t, folder)
			var want []string
			if c.want != "" {
				want = []string{c.want, takesOnly}
			}
			if !slices.Equal(lines, want) {
				t.Errorf("%q: status.txt got\n%s\nwant\n%s", c.name, strings.Join(lines, "\n"), strings.Join(want, "\n"))
			}
			checkLeft(t, folder, c.name, c.text, c.gone)
		})
	}
}

// TestCardUnknownShippedFiles: the files the image puts in the card's
// folder (piimage/card) are left alone, in silence.
func TestCardUnknownShippedFiles(t *testing.T) {
	es, err := os.ReadDir("card")
	if err != nil {
		t.Fatal(err)
	}
	folder := filepath.Join(t.TempDir(), "fencegate")
	for _, e := range es {
		text, err := os.ReadFile(filepath.Join("card", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		put(t, folder, e.Name(), string(text))
	}
	if lines := runCardUnknown(t, folder); len(lines) > 0 {
		t.Errorf("the card's own files: status.txt got\n%s\nwant nothing", strings.Join(lines, "\n"))
	}
}

// TestCardUnknownMany: a folder that a broken laptop filled lists 20
// names, then counts the others; a private key past the 20 is removed all
// the same.
func TestCardUnknownMany(t *testing.T) {
	folder := filepath.Join(t.TempDir(), "fencegate")
	for i := range 25 {
		put(t, folder, "junk-"+string(rune('a'+i)), "")
	}
	put(t, folder, "zz-key", pemKey)
	lines := runCardUnknown(t, folder)
	if len(lines) != 22 || lines[19] != notTaken("junk-t") ||
		lines[20] != "and 6 more names the Pi does not take (private keys among them, overwritten and removed: 1)" || lines[21] != takesOnly {
		t.Errorf("status.txt got\n%s\nwant 20 names, then and 6 more, 1 a private key", strings.Join(lines, "\n"))
	}
	checkLeft(t, folder, "junk-y", "", false)
	checkLeft(t, folder, "zz-key", pemKey, true)
}

// TestCardTakesAllTheyTake: every name that bootconfig and its parts read
// from the card (has NAME, "$CARD/NAME") is in cardfiles.sh's CARD_TAKES
// or CARD_LEAVES, the one list card_unknown knows them from; else a file
// the Pi took would also be listed as not taken.
func TestCardTakesAllTheyTake(t *testing.T) {
	out, err := exec.Command("sh", "-c", `. "$1/cardfiles.sh" && echo $CARD_TAKES $CARD_LEAVES`, "sh", imageLib).Output()
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{}
	for _, n := range strings.Fields(string(out)) {
		known[strings.TrimSuffix(n, "/")] = true
	}
	parts, _ := filepath.Glob(filepath.Join(imageLib, "*.sh"))
	re := regexp.MustCompile(`\bhas "?([A-Za-z0-9._-]+)|"\$CARD/([A-Za-z0-9._-]+)|"\$CARD"/([A-Za-z0-9._-]+)/`)
	comment := regexp.MustCompile(`(?m)^\s*#.*$`)
	seen := 0
	for _, p := range append(parts, filepath.Join(imageLib, "bootconfig")) {
		text, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range re.FindAllStringSubmatch(comment.ReplaceAllString(string(text), ""), -1) {
			name := m[1] + m[2] + m[3]
			seen++
			if !known[name] {
				t.Errorf("%s takes %s from the card, which cardfiles.sh's CARD_TAKES lacks", filepath.Base(p), name)
			}
		}
	}
	if seen < 10 {
		t.Errorf("found only %d names read from the card: does the pattern still match bootconfig?", seen)
	}
}

// put makes name (a folder if it ends in /) in folder, holding text.
func put(t *testing.T, folder, name, text string) {
	t.Helper()
	if err := os.MkdirAll(folder, 0o700); err != nil {
		t.Fatal(err)
	}
	if dir, ok := strings.CutSuffix(name, "/"); ok {
		if err := os.Mkdir(filepath.Join(folder, dir), 0o700); err != nil {
			t.Fatal(err)
		}
		return
	}
	if err := os.WriteFile(filepath.Join(folder, name), []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

// checkLeft: name is gone from folder if gone, else there as it was put.
func checkLeft(t *testing.T, folder, name, text string, gone bool) {
	t.Helper()
	path := filepath.Join(folder, strings.TrimSuffix(name, "/"))
	st, err := os.Lstat(path)
	switch {
	case gone && !errors.Is(err, os.ErrNotExist):
		t.Errorf("%q, a private key, is still on the card (%v)", name, err)
	case gone:
	case err != nil:
		t.Errorf("%q is gone from the card: card_unknown acted on a file it does not take", name)
	case strings.HasSuffix(name, "/") != st.IsDir():
		t.Errorf("%q changed its kind", name)
	case !st.IsDir():
		if got, _ := os.ReadFile(path); string(got) != text {
			t.Errorf("%q holds %q, was %q: card_unknown changed a file it does not take", name, got, text)
		}
	}
}

// runCardUnknown runs card_unknown on folder as bootconfig does: in the
// Pi's sh, set -u, with bootconfig's own say and off_card. It returns the
// lines for status.txt, and checks that each is one clean line (the
// console's are the same, with "fencegate: ") and that nothing went to
// stderr.
func runCardUnknown(t *testing.T, folder string) []string {
	t.Helper()
	lib, err := filepath.Abs(imageLib)
	if err != nil {
		t.Fatal(err)
	}
	status := filepath.Join(t.TempDir(), "status")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", `set -u
eval "$(sed -n '/^say() {/p; /^off_card() {/,/^}/p' "$1/bootconfig")"
command -v say >/dev/null && command -v off_card >/dev/null || { echo "no say or off_card in bootconfig" >&2; exit 3; }
. "$1/shred.sh"
. "$1/cardfiles.sh"
card_unknown`, "sh", lib)
	cmd.Env = append(os.Environ(), "CARD="+folder, "STATUS_NEW="+status)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil || stderr.Len() > 0 {
		t.Fatalf("card_unknown: %v, stderr %q", err, stderr.String())
	}
	text, err := os.ReadFile(status)
	if errors.Is(err, os.ErrNotExist) {
		text, err = nil, nil
	}
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(text), "\n"), "\n")
	if len(text) == 0 {
		lines = nil
	}
	var console []string
	for _, l := range lines {
		console = append(console, "fencegate: "+l)
		if !utf8.ValidString(l) || strings.ContainsFunc(l, func(r rune) bool { return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) }) {
			t.Errorf("a status line that is not clean UTF-8 text: %q", l)
		}
	}
	if got := strings.TrimSuffix(stdout.String(), "\n"); got != strings.Join(console, "\n") {
		t.Errorf("console got %q, want the status lines %q", got, console)
	}
	return lines
}
