package docs_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// codeReasons are the reasons a rejection can carry: the string values
// of fence/fence.go's constants named Reason*, read from its source so
// that a reason added there without a row here fails the test.
func codeReasons(t *testing.T) map[string]string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "../fence/fence.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	reasons := map[string]string{} // value → constant
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, spec := range g.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, name := range vs.Names {
				if !strings.HasPrefix(name.Name, "Reason") {
					continue
				}
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					t.Fatalf("fence.%s is not a string literal: this test reads it from the source", name.Name)
				}
				v, err := strconv.Unquote(lit.Value)
				if err != nil {
					t.Fatal(err)
				}
				reasons[v] = name.Name
			}
		}
	}
	if len(reasons) < 10 {
		t.Fatalf("found %d Reason* constants in fence/fence.go: %v", len(reasons), reasons)
	}
	return reasons
}

var backticked = regexp.MustCompile("`([^`]+)`")

// TestReasonTable: protocol.md's table of reasons (Outcomes, rejected,
// The reasons) has a row for every reason the code can give, and none
// for a reason it cannot; its Raises column says yes or no; and the
// answer's reason field names every reason too.
func TestReasonTable(t *testing.T) {
	code := codeReasons(t)
	b, err := os.ReadFile("protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	_, section, ok := strings.Cut(doc, "\n#### The reasons\n")
	if !ok {
		t.Fatal(`protocol.md has no "#### The reasons" section`)
	}
	table := map[string]string{} // reason → raises the fence?
	inTable := false
	for _, line := range strings.Split(section, "\n") {
		if strings.HasPrefix(line, "| Reason |") {
			inTable = true
			continue
		}
		if !inTable || strings.HasPrefix(line, "|---") {
			continue
		}
		if !strings.HasPrefix(line, "|") {
			break
		}
		cells := strings.Split(line, "|")
		if len(cells) < 5 {
			t.Fatalf("row %q has too few cells", line)
		}
		raises := strings.TrimSpace(cells[3])
		if raises != "yes" && raises != "no" {
			t.Errorf("row %q: raises the fence %q, want yes or no", line, raises)
		}
		for _, m := range backticked.FindAllStringSubmatch(cells[1], -1) {
			if _, dup := table[m[1]]; dup {
				t.Errorf("reason %q has two rows", m[1])
			}
			table[m[1]] = raises
		}
	}
	if len(table) == 0 {
		t.Fatal("protocol.md's table of reasons has no rows")
	}
	for v, name := range code {
		if _, ok := table[v]; !ok {
			t.Errorf("fence.%s (%q) has no row in protocol.md's table of reasons", name, v)
		}
	}
	for v := range table {
		if _, ok := code[v]; !ok {
			t.Errorf("protocol.md's table of reasons has %q, which no fence.Reason* constant is", v)
		}
	}

	// The answer's reason field lists them all too.
	var row string
	for _, line := range strings.Split(doc, "\n") {
		if strings.HasPrefix(line, "| `reason` |") {
			row = line
		}
	}
	var named []string
	for _, m := range backticked.FindAllStringSubmatch(row, -1) {
		named = append(named, m[1])
	}
	for v, name := range code {
		if !slices.Contains(named, v) {
			t.Errorf("protocol.md's answer field reason does not name fence.%s (%q)", name, v)
		}
	}
}
