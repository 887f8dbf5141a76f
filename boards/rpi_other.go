//go:build !linux

package boards

import "errors"

// RaspberryPi is only available on Linux.
type RaspberryPi struct{ Model Model }

// OpenRaspberryPi fails: the GPIO character device exists only on Linux.
func OpenRaspberryPi(Model, []OutputSpec) (*RaspberryPi, error) {
	return nil, errors.New("boards: the raspberry-pi board needs Linux")
}

// Pin fails.
func (p *RaspberryPi) Pin(string) (Pin, error) { return nil, errors.New("boards: not on Linux") }

// Close does nothing.
func (p *RaspberryPi) Close() error { return nil }
