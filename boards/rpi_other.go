//go:build !linux

package boards

import (
	"errors"

	"github.com/fencegate/fencegate/actuator"
	"github.com/fencegate/fencegate/boards/pinmap"
)

// errNotLinux is why a Raspberry Pi board cannot be opened in this build.
var errNotLinux = boardError{errors.New("boards: the raspberry-pi board needs Linux (the GPIO character device); use board: sim here")}

// RaspberryPi is only available on Linux. This stub lets every package
// build on macOS and Windows, where only the sim board runs; boards.go
// checks that it has the real board's methods.
type RaspberryPi struct {
	Model pinmap.Model
	Chip  string
}

// OpenRaspberryPi fails: the GPIO character device exists only on Linux.
func OpenRaspberryPi(pinmap.Model, []Line) (*RaspberryPi, error) { return nil, errNotLinux }

func openRaspberryPi(pinmap.Model, Options) (*RaspberryPi, error) { return nil, errNotLinux }

func checkRaspberryPi(pinmap.Model, Options) (Report, error) { return Report{}, errNotLinux }

// String implements Board.
func (p *RaspberryPi) String() string { return p.Model.Name }

// Pin implements Board; it always fails.
func (p *RaspberryPi) Pin(string) (actuator.Pin, error) { return nil, errNotLinux }

// TakeOver implements Opening; it always fails.
func (p *RaspberryPi) TakeOver([]Line) (Board, error) { return nil, errNotLinux }

// Input implements Board; it always fails.
func (p *RaspberryPi) Input(string) (Input, error) { return nil, errNotLinux }

// Close implements Board.
func (p *RaspberryPi) Close() error { return nil }

type rpiPin struct{}

// Out implements actuator.Pin; it always fails.
func (rpiPin) Out(bool) error { return errNotLinux }

// Level implements actuator.Pin; it always fails.
func (rpiPin) Level() (bool, error) { return false, errNotLinux }

type rpiInput struct{}

// Level implements Input; it always fails.
func (rpiInput) Level() (bool, error) { return false, errNotLinux }
