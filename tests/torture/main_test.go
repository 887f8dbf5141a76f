//go:build linux

package torture

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// roleEnv makes the test binary a controller process (see controllerMain)
// instead of running the tests.
const roleEnv = "FENCEGATE_TORTURE_ROLE"

// gatewayBin is the gateway, built by TestMain.
var gatewayBin string

func TestMain(m *testing.M) {
	if os.Getenv(roleEnv) == "controller" {
		os.Exit(controllerMain())
	}
	dir, err := os.MkdirTemp("", "torture")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	gatewayBin = filepath.Join(dir, "gateway")
	// -race=false: the gateway is not what this test races; as it runs
	// in production, it is killed at moments that matter.
	out, err := exec.Command("go", "build", "-race=false", "-o", gatewayBin, "github.com/fencegate/fencegate/cmd/gateway").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build gateway: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// now is CLOCK_MONOTONIC in nanoseconds: one clock for every process of
// the test, which a wall clock step cannot move.
func now() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic(err)
	}
	return ts.Nano()
}
