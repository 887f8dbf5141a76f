package packaging

import (
	"fmt"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

var (
	// mdLink is an inline Markdown link or image, [text](target "title")
	// or ![alt](target), and mdRef a reference definition, [ref]: target.
	mdLink = regexp.MustCompile(`!?\[[^\]]*\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)`)
	mdRef  = regexp.MustCompile(`(?m)^ {0,3}\[[^\]]+\]:\s*<?([^\s>]+)>?`)
	// codeSpan is inline code, in which nothing is a link.
	codeSpan = regexp.MustCompile("`[^`\n]*`")
	// scheme starts an absolute URL (https:, mailto:, ...) or a
	// network-path reference (//host).
	scheme = regexp.MustCompile(`^([a-zA-Z][a-zA-Z0-9+.-]*:|//)`)
	// docPath is a path into the package's documentation named in a text,
	// such as a unit's Documentation= or a comment in the configuration.
	docPath = regexp.MustCompile(docDir + `/[^\s"'()<>` + "`" + `]*[^\s"'()<>.,;:` + "`" + `]`)
)

// relativeLinks are the targets of the links in a Markdown text that name a
// file beside it: no URLs, no pure #anchors, without #fragment or ?query,
// and nothing in code.
func relativeLinks(md string) []string {
	var text strings.Builder
	fence := ""
	for _, l := range strings.Split(md, "\n") {
		t := strings.TrimSpace(l)
		switch {
		case fence != "":
			if strings.HasPrefix(t, fence) {
				fence = ""
			}
			continue
		case strings.HasPrefix(t, "```"), strings.HasPrefix(t, "~~~"):
			fence = t[:3]
			continue
		}
		text.WriteString(codeSpan.ReplaceAllString(l, "") + "\n")
	}
	var links []string
	for _, re := range []*regexp.Regexp{mdLink, mdRef} {
		for _, m := range re.FindAllStringSubmatch(text.String(), -1) {
			target := m[1]
			if target == "" || target[0] == '#' || scheme.MatchString(target) {
				continue
			}
			target, _, _ = strings.Cut(target, "#")
			target, _, _ = strings.Cut(target, "?")
			if u, err := url.PathUnescape(target); err == nil {
				target = u
			}
			links = append(links, target)
		}
	}
	return links
}

// brokenLinks checks the documentation of a package: shipped maps each
// path the package installs to a file with its content. Every relative
// link in a shipped .md, and every path under docDir named in any shipped
// text file, must be a shipped file or a directory holding one. It returns
// what is broken, and the number of links it followed.
func brokenLinks(shipped map[string]string) (broken []string, followed int, err error) {
	present := func(p string) bool {
		if _, ok := shipped[p]; ok {
			return true
		}
		for dst := range shipped {
			if strings.HasPrefix(dst, p+"/") {
				return true
			}
		}
		return false
	}
	for dst, file := range shipped {
		if file == "" || !strings.HasPrefix(dst, docDir+"/") && !strings.HasPrefix(dst, "/etc/") && !strings.HasPrefix(dst, "/lib/systemd/") {
			continue // the binary
		}
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, 0, err
		}
		text := string(b)
		if strings.HasSuffix(dst, ".md") {
			for _, target := range relativeLinks(text) {
				followed++
				p := path.Join(path.Dir(dst), target)
				if strings.HasPrefix(target, "/") {
					p = path.Clean(target)
				}
				if !present(p) {
					broken = append(broken, fmt.Sprintf("%s links to %s, but the package does not ship %s", dst, target, p))
				}
			}
		}
		for _, p := range docPath.FindAllString(text, -1) {
			followed++
			if !present(path.Clean(p)) {
				broken = append(broken, fmt.Sprintf("%s names %s, which the package does not ship", dst, p))
			}
		}
	}
	sort.Strings(broken)
	return broken, followed, nil
}

// nfpmShipped is what packaging/nfpm.yaml's contents install: each path
// and the file in the repository it comes from ("" for the binary, which
// make builds). A glob's dst must be a directory (end in /), where nfpm
// puts each match under its base name.
func nfpmShipped(t *testing.T) map[string]string {
	t.Helper()
	root := repoRoot(t)
	shipped := map[string]string{}
	for _, c := range readNfpm(t).Contents {
		switch {
		case strings.Contains(c.Src, "$"):
			shipped[c.Dst] = ""
		case strings.ContainsAny(c.Src, "*?["):
			if !strings.HasSuffix(c.Dst, "/") {
				t.Fatalf("packaging/nfpm.yaml: src %s is a glob, so dst %s must end in /", c.Src, c.Dst)
			}
			matches, err := filepath.Glob(filepath.Join(root, c.Src))
			if err != nil || len(matches) == 0 {
				t.Fatalf("packaging/nfpm.yaml: src %s matches nothing (%v)", c.Src, err)
			}
			for _, m := range matches {
				shipped[c.Dst+filepath.Base(m)] = m
			}
		default:
			shipped[c.Dst] = filepath.Join(root, c.Src)
		}
	}
	return shipped
}

// TestShippedDocLinks: every relative link in the documentation the
// package ships, as packaging/nfpm.yaml lists it, names a file the package
// ships too. (TestDeb checks the same in the built packages.)
func TestShippedDocLinks(t *testing.T) {
	shipped := nfpmShipped(t)
	broken, followed, err := brokenLinks(shipped)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range broken {
		t.Errorf("%s: ship it in packaging/nfpm.yaml, or change the link", b)
	}
	if followed < 20 {
		t.Errorf("followed %d links in the shipped documentation; want the README's and the docs' (at least 20)", followed)
	}
	t.Logf("%d shipped files; %d links and named paths followed", len(shipped), followed)
}

// TestRelativeLinks: which link targets the link check sees.
func TestRelativeLinks(t *testing.T) {
	md := strings.Join([]string{
		"See [the design](design.md#a-broken-store) and ![a picture](img/a%20b.png \"title\").",
		"[web](https://example.com/x.md), [mail](mailto:a@b.c), [here](#top), [up](../README.md?x=1)",
		"`[not a link](code.md)` and [`code` text](real.md)",
		"```sh",
		"echo [no](fenced.md)",
		"```",
		"[ref]: <refdef.md>",
	}, "\n")
	got := relativeLinks(md)
	want := []string{"design.md", "img/a b.png", "../README.md", "real.md", "refdef.md"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("relativeLinks = %q, want %q", got, want)
	}

	// And brokenLinks finds a link to a file that is not shipped.
	dir := t.TempDir()
	readme := filepath.Join(dir, "README.md")
	os.WriteFile(readme, []byte("[ok](docs/a.md) [gone](docs/b.md)\n"), 0o644)
	conf := filepath.Join(dir, "gateway.yaml")
	os.WriteFile(conf, []byte("# see "+docDir+"/docs/a.md and "+docDir+"/c.md.\n"), 0o644)
	broken, followed, err := brokenLinks(map[string]string{
		docDir + "/README.md":    readme,
		docDir + "/docs/a.md":    conf, // a .md without links that names c.md
		"/etc/fencegate/gw.yaml": conf,
	})
	if err != nil {
		t.Fatal(err)
	}
	want = []string{
		"/etc/fencegate/gw.yaml names " + docDir + "/c.md, which the package does not ship",
		docDir + "/README.md links to docs/b.md, but the package does not ship " + docDir + "/docs/b.md",
		docDir + "/docs/a.md names " + docDir + "/c.md, which the package does not ship",
	}
	if strings.Join(broken, "\n") != strings.Join(want, "\n") || followed != 6 {
		t.Errorf("brokenLinks = %q, %d followed; want %q, 6 followed", broken, followed, want)
	}
}
