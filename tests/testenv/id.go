package testenv

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// maxID is the longest id ID returns: a gateway id may have 64 characters.
const maxID = 64

var (
	// runTag tells this test process from every other, on this machine
	// (the pid) and across runs and machines (the random part).
	runTag = strconv.FormatInt(int64(os.Getpid()), 36) + fmt.Sprintf("%06x", rand.Uint32()&0xffffff)

	tagMu  sync.Mutex
	tagSeq int
	tags   = map[testing.TB]string{}
)

// ID returns an id for kind (a gateway id "gw", a controller name, a
// command id "k1") unique to this run of t: kind, then t's name, this
// process and a random part. Calls with the same t and kind return the same
// id, so helpers can find a test's ids without passing them around; other
// tests, other runs of t (-count) and concurrent suites get other ids, so
// an answer meant for one can never count for another. The id has at most
// 64 characters of [A-Za-z0-9_-], as gateway ids must.
func ID(t testing.TB, kind string) string {
	t.Helper()
	tagMu.Lock()
	tag, ok := tags[t]
	if !ok {
		tagSeq++
		tag = runTag + strconv.FormatInt(int64(tagSeq), 36)
		tags[t] = tag
		tagMu.Unlock()
		t.Cleanup(func() { tagMu.Lock(); delete(tags, t); tagMu.Unlock() })
	} else {
		tagMu.Unlock()
	}
	room := maxID - len(kind) - len(tag) - 2
	if !validID(kind) || room < 0 {
		t.Fatalf("testenv.ID: kind %q: use at most %d characters of [A-Za-z0-9_-]", kind, maxID-len(tag)-3)
	}
	name := strings.Map(func(r rune) rune {
		if validID(string(r)) {
			return r
		}
		return '_'
	}, strings.TrimPrefix(t.Name(), "Test"))
	if len(name) > room {
		name = name[:room]
	}
	if name == "" {
		return kind + "-" + tag
	}
	return kind + "-" + name + "-" + tag
}

// validID reports whether s is a non-empty string of [A-Za-z0-9_-].
func validID(s string) bool {
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return false
		}
	}
	return s != ""
}
