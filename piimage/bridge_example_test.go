package piimage

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/fencegate/fencegate/sitebridge"
)

// TestBridgeExample: the card's bridge.txt.example, renamed, is a bridge
// to a TLS site broker.
func TestBridgeExample(t *testing.T) {
	path := filepath.Join("card", "bridge.txt.example")
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s, err := sitebridge.Parse(f, path)
	if err != nil {
		t.Fatal(err)
	}
	if s.Off || s.Broker != "tls://broker.site.lan:8883" || s.Username == "" {
		t.Errorf("%s: %+v; want a bridge to tls://broker.site.lan:8883 with a user", path, s)
	}
}
