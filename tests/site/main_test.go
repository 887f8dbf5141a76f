package site

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/fencegate/fencegate/tests/testenv"
)

// gatewayBin is the gateway, built by TestMain.
var gatewayBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "fencegate-site-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	gatewayBin = filepath.Join(dir, "gateway")
	// The link is kept here (.gitignore ignores *.test) for the next run.
	if err := testenv.GoBuild("gateway.test", gatewayBin, "../../cmd/gateway"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
