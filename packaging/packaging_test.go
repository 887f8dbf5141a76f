// Package packaging holds the tests of fencegate's release artefacts: the
// static cross builds of `make dist` and the .deb packages of `make deb`
// (nfpm configuration, default configuration, systemd unit and maintainer
// scripts, all in this directory). See docs/packaging.md.
//
// The tests run the real `make deb` once, into a temporary directory, and
// inspect what it made with dpkg-deb, debug/elf, debug/buildinfo and
// systemd-analyze. Missing programs skip the tests on a laptop and fail them
// under CI (CI=true).
package packaging

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"debug/buildinfo"
	"debug/elf"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencegate/fencegate/tests/testenv"
)

const (
	// testVersion is what `git describe` would say three commits after a
	// v1.2.3 tag; debVersion is the package version made of it.
	testVersion = "v1.2.3-4-gabcdef0"
	debVersion  = "1.2.3+4.gabcdef0"

	configPath    = "/etc/fencegate/gateway.yaml"
	unitPath      = "/lib/systemd/system/fencegate.service"
	binPath       = "/usr/bin/gateway"
	docDir        = "/usr/share/doc/fencegate"
	copyrightPath = docDir + "/copyright"
)

// debArches are the packages `make deb` builds, with the binary each takes.
var debArches = []struct {
	arch    string // Debian architecture
	machine elf.Machine
	class   elf.Class
	goarch  string
	goarm   string // "" for arm64
}{
	{"arm64", elf.EM_AARCH64, elf.ELFCLASS64, "arm64", ""},
	{"armhf", elf.EM_ARM, elf.ELFCLASS32, "arm", "6"}, // ARMv6: runs on every Pi, the Zero and 1 too
}

// distBinaries are the bare binaries `make dist` builds.
var distBinaries = []struct {
	name    string
	machine elf.Machine
	class   elf.Class
	goarch  string
	goarm   string
}{
	{"gateway-linux-arm64", elf.EM_AARCH64, elf.ELFCLASS64, "arm64", ""},
	{"gateway-linux-armv7", elf.EM_ARM, elf.ELFCLASS32, "arm", "7"},
	{"gateway-linux-armv6", elf.EM_ARM, elf.ELFCLASS32, "arm", "6"},
}

// distTags are the build tags in make dist's DIST_FLAGS: the Raspberry Pi
// binaries have no simulator, and so link neither the embedded broker nor
// its dependencies. checkELF checks that the binaries were built with
// them; packaging/copyright covers exactly the modules they link.
const distTags = "nosim"

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
	buildTime time.Duration
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// repoRoot is the module's root: tests run in their package's directory.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// dist runs `make deb` (which runs `make dist` first) once for all tests
// and returns the directory it wrote to.
func dist(t *testing.T) string {
	t.Helper()
	mk := testenv.Program(t, "make")
	testenv.Program(t, "sha256sum")
	root := repoRoot(t)
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "fencegate-dist-")
		if buildErr != nil {
			return
		}
		start := time.Now()
		cmd := exec.Command(mk, "-C", root, "deb", "DIST="+buildDir, "VERSION="+testVersion)
		out, err := cmd.CombinedOutput()
		buildTime = time.Since(start)
		if err != nil {
			buildErr = fmt.Errorf("make deb: %v\n%s", err, out)
		}
		t.Logf("make deb (shared by the tests) took %v", buildTime.Round(time.Millisecond))
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildDir
}

func debFile(dir, arch string) string {
	return filepath.Join(dir, fmt.Sprintf("fencegate_%s_%s.deb", debVersion, arch))
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// checkELF checks a Go binary for a Raspberry Pi: its ELF class and
// machine, static, stripped, and built as make dist says.
func checkELF(t *testing.T, path string, machine elf.Machine, class elf.Class, goarch, goarm string) {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	defer f.Close()
	if f.Class != class || f.Machine != machine || f.OSABI != elf.ELFOSABI_NONE && f.OSABI != elf.ELFOSABI_LINUX {
		t.Errorf("%s: ELF %v %v %v; want %v %v for Linux", path, f.Class, f.Machine, f.OSABI, class, machine)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("%s: has a %v program header; want a static binary (CGO_ENABLED=0)", path, p.Type)
		}
	}
	if f.Section(".symtab") != nil {
		t.Errorf("%s: has a symbol table; want it stripped (-ldflags \"-s -w\")", path)
	}
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		t.Fatalf("%s: build info: %v", path, err)
	}
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	want := map[string]string{"GOOS": "linux", "GOARCH": goarch, "CGO_ENABLED": "0", "-trimpath": "true", "-tags": distTags}
	if goarm != "" {
		want["GOARM"] = goarm
	}
	for k, v := range want {
		if settings[k] != v {
			t.Errorf("%s: build setting %s = %q, want %q", path, k, settings[k], v)
		}
	}
	if bi.Path != "github.com/fencegate/fencegate/cmd/gateway" {
		t.Errorf("%s: main package %q, want the gateway", path, bi.Path)
	}
	// The modules linked (what `go version -m` lists) are the ones
	// packaging/copyright covers, and the simulator's are not among them.
	shipped := shippedModules(t, goarch, goarm)
	linked := map[string]bool{}
	for _, d := range bi.Deps {
		linked[d.Path] = true
		if strings.HasPrefix(d.Path, "github.com/mochi-mqtt/server") {
			t.Errorf("%s links %s, the simulator's embedded broker; want it built with -tags %s, as DIST_FLAGS says", path, d.Path, distTags)
		} else if shipped[d.Path] == nil {
			t.Errorf("%s links %s, which go list -deps -tags %s does not list, so packaging/copyright does not cover it: build with DIST_FLAGS", path, d.Path, distTags)
		}
	}
	for m := range shipped {
		if !linked[m] {
			t.Errorf("%s does not link %s, which go list -deps -tags %s lists", path, m, distTags)
		}
	}
	// In a git checkout, `gateway version` must name the commit (Go cannot
	// stamp one in a linked worktree: see goStamps).
	if goStamps(repoRoot(t)) {
		if settings["vcs.revision"] == "" || bi.Main.Version == "" || bi.Main.Version == "(devel)" {
			t.Errorf("%s: module version %q, vcs.revision %q; want the commit stamped (-buildvcs)", path, bi.Main.Version, settings["vcs.revision"])
		}
	}
}

func TestDebVersion(t *testing.T) {
	sh := testenv.Program(t, "sh")
	script := filepath.Join(repoRoot(t), "packaging", "debversion.sh")
	for _, tt := range []struct{ in, want string }{
		{"v1.2.3", "1.2.3"},
		{"v1.2.3-rc1", "1.2.3~rc1"},
		{"v1.2.3-4-gabcdef0", "1.2.3+4.gabcdef0"},
		{"v1.2.3-4-gabcdef0-dirty", "1.2.3+4.gabcdef0.dirty"},
		{"v1.0.0-rc1-2-gabc1234", "1.0.0~rc1+2.gabc1234"},
		{"abcdef0", "0.0.0+gitabcdef0"},
		{"1a2b3c4-dirty", "0.0.0+git1a2b3c4.dirty"}, // a hash that starts with a digit is no tag
		{"v0.0.0-unknown", "0.0.0~unknown"},         // the Makefile's fallback without git
	} {
		out, err := exec.Command(sh, script, tt.in).Output()
		if got := strings.TrimSpace(string(out)); err != nil || got != tt.want {
			t.Errorf("debversion.sh %q = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
	for _, bad := range []string{"", "a tag with spaces"} {
		if out, err := exec.Command(sh, script, bad).Output(); err == nil {
			t.Errorf("debversion.sh %q = %q; want an error", bad, out)
		}
	}
	// The order dpkg gives these versions is the order of the commits.
	if dpkg, err := exec.LookPath("dpkg"); err == nil {
		order := []string{"0.0.0~unknown", "0.0.0+gitabcdef0", "1.0.0~rc1", "1.0.0~rc1+2.gabc1234", "1.0.0", "1.0.0+4.gabcdef0", "1.0.0+4.gabcdef0.dirty", "1.0.1"}
		for i := 0; i+1 < len(order); i++ {
			if err := exec.Command(dpkg, "--compare-versions", order[i], "lt", order[i+1]).Run(); err != nil {
				t.Errorf("dpkg does not sort %s before %s", order[i], order[i+1])
			}
		}
	}
}

// TestDist: make dist cross-builds three static binaries and lists them,
// with the packages, in SHA256SUMS.
func TestDist(t *testing.T) {
	dir := dist(t)
	for _, b := range distBinaries {
		t.Run(b.name, func(t *testing.T) {
			checkELF(t, filepath.Join(dir, b.name), b.machine, b.class, b.goarch, b.goarm)
		})
	}

	f, err := os.Open(filepath.Join(dir, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	listed := map[string]bool{}
	line := regexp.MustCompile(`^([0-9a-f]{64})  (\S+)$`) // sha256sum's text mode
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		m := line.FindStringSubmatch(sc.Text())
		if m == nil {
			t.Errorf("SHA256SUMS: bad line %q", sc.Text())
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, m[2]))
		if err != nil {
			t.Errorf("SHA256SUMS lists %s: %v", m[2], err)
			continue
		}
		if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != m[1] {
			t.Errorf("SHA256SUMS: %s does not match", m[2])
		}
		listed[m[2]] = true
	}
	want := []string{filepath.Base(debFile(dir, "arm64")), filepath.Base(debFile(dir, "armhf"))}
	for _, b := range distBinaries {
		want = append(want, b.name)
	}
	for _, w := range want {
		if !listed[w] {
			t.Errorf("SHA256SUMS does not list %s", w)
		}
	}
	if len(listed) != len(want) {
		t.Errorf("SHA256SUMS lists %d files, want %d: %v", len(listed), len(want), listed)
	}
}

// contentsLine is one line of dpkg-deb --contents (tar tv).
var contentsLine = regexp.MustCompile(`^([-dl][rwxsStT-]{9}) (\S+)/(\S+)\s+\d+ \S+ \S+ \.(/\S*)`)

// TestDeb inspects each package: control fields, files, owners and modes,
// conffiles, maintainer scripts, the packaged binary's architecture, and
// the unit's and the configuration's text against packaging/.
func TestDeb(t *testing.T) {
	dir := dist(t)
	dpkgDeb := testenv.Program(t, "dpkg-deb")
	sh := testenv.Program(t, "sh")
	root := repoRoot(t)
	for _, a := range debArches {
		t.Run(a.arch, func(t *testing.T) {
			deb := debFile(dir, a.arch)

			fields := map[string]string{}
			for _, f := range []string{"Package", "Version", "Architecture", "Depends", "Maintainer", "Description"} {
				fields[f] = strings.TrimSpace(run(t, dpkgDeb, "--field", deb, f))
			}
			for k, v := range map[string]string{"Package": "fencegate", "Version": debVersion, "Architecture": a.arch} {
				if fields[k] != v {
					t.Errorf("%s: %s = %q, want %q", deb, k, fields[k], v)
				}
			}
			if !regexp.MustCompile(`(^|, )adduser($|[ ,])`).MatchString(fields["Depends"]) {
				t.Errorf("Depends = %q; want adduser (the maintainer scripts use it)", fields["Depends"])
			}
			if fields["Maintainer"] == "" || fields["Description"] == "" {
				t.Errorf("Maintainer %q, Description %q: want both", fields["Maintainer"], fields["Description"])
			}
			// The licence: Debian's control file has no License field, and
			// nfpm writes its license into none for a .deb (it does for RPM
			// and APK). The package's licence is its copyright file's, below.
			lic := readNfpm(t).License
			if lic != "Apache-2.0" {
				t.Errorf("packaging/nfpm.yaml: license %q, want Apache-2.0", lic)
			}
			if got := strings.TrimSpace(run(t, dpkgDeb, "--field", deb, "License")); got != "" && got != lic {
				t.Errorf("%s: License %q, want %q as nfpm.yaml says", deb, got, lic)
			} else if got == "" {
				t.Logf("dpkg-deb --field License: none (Debian has no such field); the licence is in %s", copyrightPath)
			}
			t.Logf("dpkg-deb --info:\n%s", run(t, dpkgDeb, "--info", deb))

			// Files, owners and modes.
			contents := run(t, dpkgDeb, "--contents", deb)
			t.Logf("dpkg-deb --contents:\n%s", contents)
			files := map[string]string{} // path → "mode owner/group"
			for _, l := range strings.Split(strings.TrimSpace(contents), "\n") {
				m := contentsLine.FindStringSubmatch(l)
				if m == nil {
					t.Errorf("dpkg-deb --contents: cannot read %q", l)
					continue
				}
				files[strings.TrimSuffix(m[4], "/")] = m[1] + " " + m[2] + "/" + m[3]
			}
			for path, want := range map[string]string{
				binPath:    "-rwxr-xr-x root/root",
				configPath: "-rw-r----- root/root", // group fencegate by dpkg-statoverride in postinst
				unitPath:   "-rw-r--r-- root/root",
				"/usr/lib/udev/rules.d/60-fencegate-pwm.rules": "-rw-r--r-- root/root",
				docDir + "/docs/packaging.md":                  "-rw-r--r-- root/root",
				copyrightPath:                                  "-rw-r--r-- root/root",
			} {
				if files[path] != want {
					t.Errorf("%s: %q, want %q", path, files[path], want)
				}
			}
			for path, info := range files {
				if strings.HasPrefix(path, "/var") {
					// dpkg would remove what it owns on purge; the store is never the package's.
					t.Errorf("the package ships %s (%s); /var/lib/fencegate must be made by postinst, never owned by the package", path, info)
				}
				if !strings.HasPrefix(info, "d") && !strings.HasSuffix(info, " root/root") {
					t.Errorf("%s is owned by %s; want root/root", path, info)
				}
			}

			// Control files: conffiles and maintainer scripts.
			ctl := t.TempDir()
			run(t, dpkgDeb, "--control", deb, ctl)
			conffiles, err := os.ReadFile(filepath.Join(ctl, "conffiles"))
			if err != nil || strings.TrimSpace(string(conffiles)) != configPath {
				t.Errorf("conffiles = %q, %v; want exactly %s", conffiles, err, configPath)
			}
			for _, s := range []string{"postinst", "prerm", "postrm"} {
				p := filepath.Join(ctl, s)
				fi, err := os.Stat(p)
				if err != nil {
					t.Errorf("maintainer script %s: %v", s, err)
					continue
				}
				if fi.Mode().Perm() != 0o755 {
					t.Errorf("%s: mode %v, want 0755", s, fi.Mode().Perm())
				}
				b, _ := os.ReadFile(p)
				src, _ := os.ReadFile(filepath.Join(root, "packaging", "debian", s))
				if !bytes.Equal(b, src) {
					t.Errorf("%s differs from packaging/debian/%s", s, s)
				}
				if !bytes.HasPrefix(b, []byte("#!/bin/sh\n")) {
					t.Errorf("%s: want #!/bin/sh", s)
				}
				if out, err := exec.Command(sh, "-n", p).CombinedOutput(); err != nil {
					t.Errorf("sh -n %s: %v\n%s", s, err, out)
				}
			}
			if _, err := os.Stat(filepath.Join(ctl, "preinst")); err == nil {
				t.Errorf("unexpected preinst")
			}

			// The data: the binary's architecture, the unit and the
			// configuration as in packaging/.
			data := t.TempDir()
			run(t, dpkgDeb, "--extract", deb, data)
			checkELF(t, filepath.Join(data, binPath), a.machine, a.class, a.goarch, a.goarm)
			for dst, src := range map[string]string{
				unitPath:      "packaging/fencegate.service",
				configPath:    "packaging/gateway.yaml",
				copyrightPath: "packaging/copyright",
			} {
				got, err := os.ReadFile(filepath.Join(data, dst))
				if err != nil {
					t.Fatal(err)
				}
				want, err := os.ReadFile(filepath.Join(root, src))
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					t.Errorf("%s in the package differs from %s", dst, src)
				}
			}
			// The files are the ones nfpm.yaml lists, and every link in the
			// shipped documentation names one of them.
			shipped := map[string]string{}
			filepath.WalkDir(data, func(p string, d os.DirEntry, err error) error {
				if err == nil && d.Type().IsRegular() {
					shipped[strings.TrimPrefix(p, data)] = p
				}
				return err
			})
			want := nfpmShipped(t)
			for p := range shipped {
				if _, ok := want[p]; !ok {
					t.Errorf("the package ships %s, which packaging/nfpm.yaml does not list", p)
				}
			}
			for p := range want {
				if _, ok := shipped[p]; !ok {
					t.Errorf("packaging/nfpm.yaml lists %s, which the package does not ship", p)
				}
			}
			broken, followed, err := brokenLinks(shipped)
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range broken {
				t.Errorf("%s", b)
			}
			t.Logf("%d links and named paths in the shipped files followed", followed)

			// The copyright file gives fencegate itself nfpm.yaml's licence.
			cr, _ := os.ReadFile(filepath.Join(data, copyrightPath))
			if ps, err := parseDEP5(string(cr)); err != nil || len(ps) < 2 || ps[1].fields["Files"] != "*" || ps[1].fields["License"] != lic {
				t.Errorf("%s: want a first Files: * paragraph with License: %s (%v)", copyrightPath, lic, err)
			}
		})
	}
}

// unitSettings reads a unit file's [Service] and [Unit] assignments;
// repeated keys accumulate.
func unitSettings(t *testing.T, text string) map[string][]string {
	t.Helper()
	m := map[string][]string{}
	for _, l := range strings.Split(text, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || l[0] == '#' || l[0] == ';' || l[0] == '[' {
			continue
		}
		k, v, ok := strings.Cut(l, "=")
		if !ok {
			t.Errorf("unit: cannot read %q", l)
			continue
		}
		m[k] = append(m[k], v)
	}
	return m
}

// TestUnit checks the unit's directives, then has systemd-analyze verify
// it and score its exposure.
func TestUnit(t *testing.T) {
	text, err := os.ReadFile(filepath.Join(repoRoot(t), "packaging", "fencegate.service"))
	if err != nil {
		t.Fatal(err)
	}
	s := unitSettings(t, string(text))
	want := map[string]string{
		"Type":                     "notify",
		"NotifyAccess":             "main",
		"WatchdogSec":              "30s",
		"ExecStart":                binPath + " run --config " + configPath,
		"Restart":                  "on-failure",
		"RestartSec":               "2",
		"RestartPreventExitStatus": "64 78",
		"After":                    "network-online.target",
		"Wants":                    "network-online.target",
		"User":                     "fencegate",
		"Group":                    "fencegate",
		"SupplementaryGroups":      "gpio dialout",
		"StateDirectory":           "fencegate",
		"StateDirectoryMode":       "0750",
		"UMask":                    "0027",
		"NoNewPrivileges":          "yes",
		"ProtectSystem":            "strict",
		"ProtectHome":              "yes",
		"PrivateTmp":               "yes",
		"PrivateDevices":           "no",
		"DevicePolicy":             "closed",
		"ProtectKernelTunables":    "yes",
		"ReadWritePaths":           "-/sys/devices/platform",
		"ProtectKernelModules":     "yes",
		"ProtectControlGroups":     "yes",
		"RestrictAddressFamilies":  "AF_INET AF_INET6 AF_UNIX",
		"RestrictNamespaces":       "yes",
		"LockPersonality":          "yes",
		"MemoryDenyWriteExecute":   "yes",
		"RestrictRealtime":         "yes",
		"SystemCallArchitectures":  "native",
		"CapabilityBoundingSet":    "",
		"WantedBy":                 "multi-user.target",
	}
	for k, v := range want {
		if got, ok := s[k]; !ok || len(got) != 1 || got[0] != v {
			t.Errorf("%s=%q; want exactly one %s=%s", k, got, k, v)
		}
	}
	if got, want := s["DeviceAllow"], []string{"char-gpiochip rw", "char-ttyUSB rw", "char-ttyACM rw", "char-ttyAMA rw", "char-ttyS rw"}; !slices.Equal(got, want) {
		t.Errorf("DeviceAllow=%q; want %q: the GPIO chips and the serial ports of Modbus RTU buses, nothing else", got, want)
	}
	// The store is created once, by postinst at first install: never by
	// the unit, whose every start would otherwise recreate a lost store.
	for k, vs := range s {
		for _, v := range vs {
			if strings.HasPrefix(k, "Exec") && regexp.MustCompile(`(^|\s)(--init|init)(\s|$)`).MatchString(v) {
				t.Errorf("%s=%s: the unit must never create the store", k, v)
			}
		}
	}
	for _, k := range []string{"ExecStartPre", "ExecStartPost", "ExecStopPost", "AmbientCapabilities", "ProcSubset", "DynamicUser"} {
		if v, ok := s[k]; ok {
			t.Errorf("%s=%q: not wanted (see docs/packaging.md)", k, v)
		}
	}

	// systemd-analyze verify checks that ExecStart's program exists and is
	// executable, so verify a copy that starts an executable in a temporary
	// directory; everything else is the packaged unit. It exits 0 on mere
	// warnings (an unknown key, a bad value), so any output fails the test.
	analyze := testenv.Program(t, "systemd-analyze")
	dir := t.TempDir()
	bin := filepath.Join(dir, "usr", "bin", "gateway")
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	copyText := strings.Replace(string(text), "ExecStart="+binPath+" ", "ExecStart="+bin+" ", 1)
	unit := filepath.Join(dir, "fencegate.service")
	if err := os.WriteFile(unit, []byte(copyText), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", unit).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	} else {
		t.Logf("systemd-analyze verify: clean")
	}
	// And a positive control: the same check catches a misspelt key.
	bad := filepath.Join(dir, "bad", "fencegate.service")
	os.MkdirAll(filepath.Dir(bad), 0o755)
	os.WriteFile(bad, []byte(strings.Replace(copyText, "ProtectHome=yes", "ProtectHomme=yes", 1)), 0o644)
	if out, _ := exec.Command(analyze, "verify", bad).CombinedOutput(); !bytes.Contains(out, []byte("ProtectHomme")) {
		t.Errorf("systemd-analyze verify did not report a misspelt key: %s", out)
	}

	// The exposure score, out of 10: the hardening must keep it at 2 or less.
	out, err = exec.Command(analyze, "security", "--offline=true", "--threshold=20", unit).CombinedOutput()
	score := regexp.MustCompile(`Overall exposure level for \S+: ([0-9.]+ \S+)`).FindSubmatch(out)
	if err != nil || score == nil {
		t.Errorf("systemd-analyze security --offline=true --threshold=20: %v\n%s", err, out)
	} else {
		t.Logf("systemd-analyze security: exposure %s", score[1])
	}
}

// TestDefaultConfigChecks: the configuration the package installs passes
// `gateway check --config-only`. The full check is what run does (store,
// board, the http port): it passes only on a Raspberry Pi with a store, so
// it is not asked here, where neither is and another program may hold
// 127.0.0.1:8080.
func TestDefaultConfigChecks(t *testing.T) {
	dir := dist(t)
	dpkgDeb := testenv.Program(t, "dpkg-deb")
	data := t.TempDir()
	run(t, dpkgDeb, "--extract", debFile(dir, "arm64"), data)
	gw := filepath.Join(t.TempDir(), "gateway")
	build := exec.Command("go", "build", "-o", gw, "./cmd/gateway")
	build.Dir = repoRoot(t)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cfg := filepath.Join(data, configPath)
	out, err := exec.Command(gw, "check", "--config-only", "--config", cfg).CombinedOutput()
	if err != nil {
		t.Fatalf("gateway check --config-only --config %s: %v\n%s", configPath, err, out)
	}
	for _, w := range []string{`"pi-gateway-1"`, "1 actuators", "ok"} {
		if !strings.Contains(string(out), w) {
			t.Errorf("gateway check: %q; want %s in it", out, w)
		}
	}
	text, _ := os.ReadFile(cfg)
	for _, w := range []string{"board: raspberry-pi", "broker: tcp://127.0.0.1:1883", "http: 127.0.0.1:8080", "store: /var/lib/fencegate/fence.db",
		"name: relay1", "pin: GPIO17", "active_low: true", `boot: "off"`} {
		if !strings.Contains(string(text), w) {
			t.Errorf("the default configuration lacks %q", w)
		}
	}
}
