package lease

import (
	"strings"
	"testing"
)

// TestAheadErrorNamesTypedTokens: a fence above etcd's revision is most
// often one that tokens typed by hand raised (gateway send --token N, as
// the docs' examples do); the error names that cause, and its remedy,
// before an etcd restore, whose remedy would be wrong for it.
func TestAheadErrorNamesTypedTokens(t *testing.T) {
	for _, e := range []*AheadError{{Fence: 49, Revision: 3}, {Fence: 7, Revision: 9, Held: 7}} {
		msg := e.Error()
		typed, restore := strings.Index(msg, "typed by hand (gateway send --token N)"), strings.Index(msg, "etcdutl snapshot restore")
		if typed < 0 || restore < 0 || typed > restore || !strings.Contains(msg, "go on typing them, above the fence") {
			t.Errorf("%+v: %s\nwant tokens typed by hand (gateway send --token N) named, with their remedy, before an etcd restore", *e, msg)
		}
	}
}
