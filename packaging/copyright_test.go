package packaging

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// dep5Format is the Format of a machine-readable debian/copyright file.
const dep5Format = "https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/"

// goroot is the copyright file's name for the Go standard library and
// runtime, which every Go binary links.
const goroot = "GOROOT/src"

// paragraph is one paragraph of a DEP-5 copyright file: its fields by name,
// each value's continuation lines joined by "\n" (a line " ." is an empty
// line), and the line it starts on.
type paragraph struct {
	line   int
	fields map[string]string
}

// parseDEP5 reads a copyright file in Debian's machine-readable format.
func parseDEP5(text string) ([]paragraph, error) {
	var ps []paragraph
	var cur *paragraph
	var last string
	for i, l := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		n := i + 1
		switch {
		case strings.TrimSpace(l) == "":
			cur = nil
		case l[0] == ' ' || l[0] == '\t':
			if cur == nil {
				return nil, fmt.Errorf("line %d: a continuation line outside a field", n)
			}
			l = strings.TrimSpace(l)
			if l == "." {
				l = ""
			}
			cur.fields[last] += "\n" + l
		default:
			name, value, ok := strings.Cut(l, ":")
			if !ok || strings.ContainsAny(name, " \t") {
				return nil, fmt.Errorf("line %d: %q is not a field (Name: value)", n, l)
			}
			if cur == nil {
				ps = append(ps, paragraph{line: n, fields: map[string]string{}})
				cur = &ps[len(ps)-1]
			}
			if _, dup := cur.fields[name]; dup {
				return nil, fmt.Errorf("line %d: field %s twice in the paragraph of line %d", n, name, cur.line)
			}
			cur.fields[name], last = strings.TrimSpace(value), name
		}
	}
	return ps, nil
}

// licenceNames are the short names in a License field's first line
// ("MIT", "EPL-2.0 or BSD-3-Clause").
func licenceNames(field string) []string {
	first, _, _ := strings.Cut(field, "\n")
	return regexp.MustCompile(`\s+(?:or|and)\s+`).Split(strings.TrimSpace(first), -1)
}

// module is a module linked into the gateway: its directory in the module
// cache and the Go files the gateway compiles from it.
type module struct {
	dir   string
	files []string
}

// linkedModules are the modules the gateway of either package links (see
// shippedModules), and the Go standard library as goroot.
func linkedModules(t *testing.T) map[string]*module {
	t.Helper()
	gorootDir, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		t.Fatalf("go env GOROOT: %v", err)
	}
	mods := map[string]*module{goroot: {dir: strings.TrimSpace(string(gorootDir))}}
	for _, a := range debArches {
		for path, m := range shippedModules(t, a.goarch, a.goarm) {
			if mods[path] == nil {
				mods[path] = &module{dir: m.dir}
			}
			mods[path].files = append(mods[path].files, m.files...)
		}
	}
	return mods
}

// shippedModules are the modules `go list -deps` reports for the gateway
// built as make dist builds it for GOARCH goarch (and GOARM goarm): for
// Linux, without cgo, with the build tags distTags.
func shippedModules(t *testing.T, goarch, goarm string) map[string]*module {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-json", "-tags", distTags, "./cmd/gateway")
	cmd.Dir = repoRoot(t)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+goarch, "GOARM="+goarm)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("GOARCH=%s GOARM=%s go list -deps -json -tags %s ./cmd/gateway: %v", goarch, goarm, distTags, err)
	}
	mods := map[string]*module{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p struct {
			Dir     string
			GoFiles []string
			Module  *struct {
				Path, Dir string
				Main      bool
			}
		}
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("go list -json: %v", err)
		}
		if p.Module == nil || p.Module.Main {
			continue // the standard library, or fencegate itself
		}
		m := mods[p.Module.Path]
		if m == nil {
			m = &module{dir: p.Module.Dir}
			mods[p.Module.Path] = m
		}
		for _, f := range p.GoFiles {
			m.files = append(m.files, filepath.Join(p.Dir, f))
		}
	}
	return mods
}

// licenceFiles is the text of a module's LICENSE, NOTICE, PATENTS, AUTHORS
// and licence text files (paho's edl-v10), concatenated.
func (m *module) licenceFiles(t *testing.T) string {
	t.Helper()
	entries, err := os.ReadDir(m.dir)
	if err != nil {
		t.Fatalf("module directory: %v", err)
	}
	name := regexp.MustCompile(`(?i)^(licen[cs]e|notice|copying|patents|authors)|^[a-z]+-v[0-9]+$`)
	var b strings.Builder
	for _, e := range entries {
		if e.Type().IsRegular() && name.MatchString(e.Name()) {
			text, err := os.ReadFile(filepath.Join(m.dir, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			b.Write(text)
			b.WriteString("\n")
		}
	}
	return b.String()
}

// names reports whether holder is named in the module's licence files or
// in the header of one of the Go files the gateway compiles from it.
func (m *module) names(t *testing.T, holder string) bool {
	t.Helper()
	holder = squash(holder)
	if strings.Contains(squash(m.licenceFiles(t)), holder) {
		return true
	}
	for _, f := range m.files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(squash(string(b[:min(len(b), 2048)])), holder) {
			return true
		}
	}
	return false
}

// copyrightLine matches a copyright notice's own line in a licence text,
// which the copyright file gives in its Copyright fields instead.
var copyrightLine = regexp.MustCompile(`(?im)^\s*(copyright\s+(\(c\)\s*)?[0-9]{4}.*|all rights reserved\.?)\s*$`)

// normalize makes licence texts comparable: without copyright lines,
// lower case, every run of white space one space.
func normalize(s string) string {
	return squash(copyrightLine.ReplaceAllString(s, ""))
}

// squash is s in lower case with every run of white space one space.
func squash(s string) string {
	return strings.Join(strings.Fields(strings.ToLower(s)), " ")
}

// holder is a Copyright line without its years ("2013, 2021 IBM Corp and
// others" → "IBM Corp and others").
func holder(line string) string {
	return regexp.MustCompile(`^(\(c\)|©)?[\s0-9,-]*`).ReplaceAllString(strings.TrimSpace(line), "")
}

// TestCopyrightCoversModules: packaging/copyright, the package's
// /usr/share/doc/fencegate/copyright, is a valid DEP-5 file with a Files
// paragraph for every module linked into the gateway of either package,
// built with make dist's tags (distTags: no simulator, so no embedded
// broker), and for none it does not link, each giving a licence whose text is the
// module's own and a copyright holder its files name. A new dependency
// without its paragraph fails here, without building a package.
func TestCopyrightCoversModules(t *testing.T) {
	text, err := os.ReadFile(filepath.Join(repoRoot(t), "packaging", "copyright"))
	if err != nil {
		t.Fatal(err)
	}
	ps, err := parseDEP5(string(text))
	if err != nil {
		t.Fatalf("packaging/copyright: %v", err)
	}
	if len(ps) == 0 || ps[0].fields["Format"] != dep5Format {
		t.Fatalf("packaging/copyright: the first paragraph must say Format: %s", dep5Format)
	}
	if ps[0].fields["Upstream-Name"] != "fencegate" {
		t.Errorf("packaging/copyright: Upstream-Name = %q, want fencegate", ps[0].fields["Upstream-Name"])
	}

	// Stand-alone License paragraphs, and the Files paragraphs that use them.
	standalone := map[string]string{}
	used := map[string]bool{}
	var files []paragraph
	for _, p := range ps[1:] {
		lic, hasLic := p.fields["License"]
		_, hasFiles := p.fields["Files"]
		switch {
		case hasFiles:
			files = append(files, p)
		case hasLic && len(p.fields) == 1 || hasLic && len(p.fields) == 2 && p.fields["Comment"] != "":
			name, body, _ := strings.Cut(lic, "\n")
			if strings.TrimSpace(body) == "" {
				t.Errorf("packaging/copyright:%d: stand-alone License %s has no text", p.line, name)
			}
			if _, dup := standalone[name]; dup {
				t.Errorf("packaging/copyright:%d: a second stand-alone License %s", p.line, name)
			}
			standalone[name] = body
		default:
			t.Errorf("packaging/copyright:%d: a paragraph that is neither Files nor License: %v", p.line, p.fields)
		}
	}
	// licenceText is the text a Files paragraph gives for each licence.
	licenceText := func(p paragraph) map[string]string {
		texts := map[string]string{}
		names := licenceNames(p.fields["License"])
		_, body, _ := strings.Cut(p.fields["License"], "\n")
		for _, n := range names {
			if strings.TrimSpace(body) != "" && len(names) == 1 {
				texts[n] = body
				continue
			}
			used[n] = true
			if _, ok := standalone[n]; !ok {
				t.Errorf("packaging/copyright:%d: License %s has neither its text here nor a stand-alone License paragraph", p.line, n)
			}
			texts[n] = standalone[n]
		}
		return texts
	}
	texts := make([]map[string]string, len(files))
	for i, p := range files {
		if p.fields["Copyright"] == "" || p.fields["License"] == "" {
			t.Errorf("packaging/copyright:%d: Files %s: want a Copyright and a License field", p.line, p.fields["Files"])
		}
		texts[i] = licenceText(p)
	}
	for n := range standalone {
		if !used[n] {
			t.Errorf("packaging/copyright: stand-alone License %s is used by no Files paragraph", n)
		}
	}
	if len(files) == 0 || files[0].fields["Files"] != "*" || files[0].fields["License"] != "Apache-2.0" {
		t.Errorf("packaging/copyright: the first Files paragraph must be fencegate's own, Files: * with License: Apache-2.0")
	}
	if !strings.Contains(standalone["Apache-2.0"], "/usr/share/common-licenses/Apache-2.0") {
		t.Errorf("packaging/copyright: License: Apache-2.0 must refer to /usr/share/common-licenses/Apache-2.0, as Debian's does")
	}
	if own, err := os.ReadFile(filepath.Join(repoRoot(t), "LICENSE")); err != nil || !bytes.Contains(own, []byte("Apache License\n                           Version 2.0, January 2004")) {
		t.Errorf("LICENSE: want the Apache License 2.0, as packaging/copyright says (%v)", err)
	}

	// Each linked module, and what the paragraphs that name it say.
	mods := linkedModules(t)
	paths := make([]string, 0, len(mods))
	for path := range mods {
		paths = append(paths, path)
	}
	sort.Slice(paths, func(i, j int) bool { return len(paths[i]) > len(paths[j]) }) // the longest prefix wins
	// moduleOf is the linked module a Files pattern belongs to.
	moduleOf := func(pattern string) string {
		for _, path := range paths {
			if strings.HasPrefix(pattern, "vendor/"+path+"/") || path == goroot && strings.HasPrefix(pattern, goroot+"/") {
				return path
			}
		}
		return ""
	}
	whole := map[string]bool{}
	for i, p := range files {
		if p.fields["Files"] == "*" {
			continue
		}
		var in []string
		for _, pattern := range strings.Fields(p.fields["Files"]) {
			path := moduleOf(pattern)
			if path == "" {
				t.Errorf("packaging/copyright:%d: Files %s is in no module the gateway links: remove it, or fix the module path", p.line, pattern)
				continue
			}
			if pattern == "vendor/"+path+"/*" || pattern == path+"/*" {
				whole[path] = true
			}
			in = append(in, path)
		}
		if len(in) == 0 {
			continue
		}
		for n, text := range texts[i] {
			for _, path := range in {
				got := mods[path].licenceFiles(t)
				if n == "Apache-2.0" {
					if !strings.Contains(got, "Apache License") || !strings.Contains(got, "Version 2.0") {
						t.Errorf("packaging/copyright:%d: %s is not under the Apache License 2.0 by its licence files in %s", p.line, path, mods[path].dir)
					}
				} else if !strings.Contains(normalize(got), normalize(text)) {
					t.Errorf("packaging/copyright:%d: the %s text given for %s is not the one in its licence files in %s", p.line, n, path, mods[path].dir)
				}
			}
		}
		for _, line := range strings.Split(p.fields["Copyright"], "\n") {
			h, found := holder(line), false
			for _, path := range in {
				found = found || mods[path].names(t, h)
			}
			if !found {
				t.Errorf("packaging/copyright:%d: Copyright %q: %q is named in none of %v", p.line, line, h, in)
			}
		}
	}
	for _, path := range paths {
		if !whole[path] {
			pattern := "vendor/" + path + "/*"
			if path == goroot {
				pattern = goroot + "/*"
			}
			t.Errorf("packaging/copyright: no Files paragraph names %s, which the gateway links: add \"Files: %s\" with the licence and copyright from its LICENSE or NOTICE in %s", path, pattern, mods[path].dir)
		}
	}
	t.Logf("packaging/copyright covers the Go standard library and %d modules in %d Files paragraphs", len(mods)-1, len(files))
}
