package mutants

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReliabilityDocNamesEveryMutant keeps docs/reliability.md's table of
// mutants complete: every mutant of the list is named there, and the doc
// names no mutant that is not in the list.
func TestReliabilityDocNamesEveryMutant(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "reliability.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	known := map[string]bool{}
	for _, m := range mutants {
		known[m.name] = true
		if !strings.Contains(doc, "| `"+m.name+"` |") {
			t.Errorf("docs/reliability.md does not list mutant %s (%s): add a row `| `%s` | what it breaks | the test that catches it |`", m.name, m.why, m.name)
		}
	}
	for _, line := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimPrefix(line, "| `"), "`")
		if strings.Contains(line, " | ") && isMutantRow(line) && !known[name] {
			t.Errorf("docs/reliability.md lists mutant %q, which tests/mutants does not have", name)
		}
	}
}

// isMutantRow reports whether a table row belongs to the mutants' table:
// its rows have three cells, the last naming Go tests.
func isMutantRow(line string) bool {
	cells := strings.Split(strings.Trim(line, "| "), " | ")
	return len(cells) == 3 && strings.Contains(cells[2], "Test")
}

// TestMutantsApply: every mutant's edits find their text exactly once in
// the working tree, so that a change of the code that moves a mutant's
// text fails make test at once, not make mutants twenty minutes later.
func TestMutantsApply(t *testing.T) {
	for _, m := range mutants {
		for _, e := range append([]edit{{m.file, m.old, m.new}}, m.more...) {
			b, err := os.ReadFile(filepath.Join("..", "..", e.file))
			if err != nil {
				t.Errorf("mutant %s: %v", m.name, err)
				continue
			}
			if n := strings.Count(string(b), e.old); n != 1 {
				t.Errorf("mutant %s: its text occurs %d times in %s (want once); update the mutant to the code:\n%s", m.name, n, e.file, e.old)
			}
		}
	}
}
