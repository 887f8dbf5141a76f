package config

import (
	"fmt"
	"regexp"
	"strings"
)

var missingSpace = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_-]*):(\S.*)$`)

// spaceHint explains a value such as "broker:tcp://h:1" that is meant as
// a key of names but lacks the space after the colon; "" if it is not one.
func spaceHint(value string, names []string) string {
	m := missingSpace.FindStringSubmatch(value)
	if m == nil {
		return ""
	}
	for _, n := range names {
		if n == m[1] {
			return fmt.Sprintf(": put a space after the colon: %q", m[1]+": "+m[2])
		}
	}
	return ""
}

// suggestKey returns the known key that key is most likely a misspelling
// of, "" if none is close: the same but for case, - or _, or within a small
// edit distance.
func suggestKey(key string, known []string) string {
	norm := func(s string) string {
		return strings.NewReplacer("-", "_", " ", "_").Replace(strings.ToLower(s))
	}
	squash := func(s string) string { return strings.ReplaceAll(norm(s), "_", "") }
	for _, k := range known {
		if norm(k) == norm(key) || squash(k) == squash(key) {
			return k
		}
	}
	best, bestD := "", 0
	for _, k := range known {
		d := editDistance(norm(key), norm(k))
		if d <= max(1, len(k)/4) && (best == "" || d < bestD) {
			best, bestD = k, d
		}
	}
	return best
}

// editDistance is the optimal string alignment distance between a and b:
// insertions, deletions, substitutions and swaps of neighbours.
func editDistance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}
