package pinmap

import (
	"errors"
	"strings"
	"testing"
)

// Device-tree model strings as the boards report them in
// /proc/device-tree/model.
func TestDetectModel(t *testing.T) {
	tests := []struct{ dt, want string }{
		{"Raspberry Pi Zero 2 W Rev 1.0\x00", "raspberry-pi-zero-2-w"},
		{"Raspberry Pi 3 Model B Rev 1.2\x00", "raspberry-pi-3b"},
		{"Raspberry Pi 3 Model B", "raspberry-pi-3b"}, // mainline DT, as under QEMU's raspi3b
		{"Raspberry Pi 3 Model B Plus Rev 1.3\x00", "raspberry-pi-3b-plus"},
		{"Raspberry Pi 4 Model B Rev 1.5\x00", "raspberry-pi-4b"},
		{"Raspberry Pi 400 Rev 1.0\x00", "raspberry-pi-400"},
		{"Raspberry Pi 5 Model B Rev 1.0\x00", "raspberry-pi-5"},
		{"Raspberry Pi Compute Module 4 Rev 1.0\x00", "raspberry-pi-cm4"},
		{"Raspberry Pi Model B Rev 2\x00", ""},     // Pi 1: not supported
		{"Raspberry Pi Zero W Rev 1.1\x00", ""},    // Zero W: not supported
		{"Raspberry Pi 2 Model B Rev 1.1\x00", ""}, // Pi 2: not supported
		{"linux,dummy-virt", ""},
		{"", ""},
	}
	for _, tt := range tests {
		m, err := DetectModel(tt.dt)
		if tt.want == "" {
			if !errors.Is(err, ErrNotRaspberryPi) || !strings.Contains(err.Error(), "raspberry-pi-4b") {
				t.Errorf("DetectModel(%q) = %v, %v; want ErrNotRaspberryPi listing the supported boards", tt.dt, m.Board, err)
			}
			continue
		}
		if err != nil || m.Board != tt.want {
			t.Errorf("DetectModel(%q) = %q, %v; want %q", tt.dt, m.Board, err, tt.want)
		}
	}
}

func TestBoardNames(t *testing.T) {
	for _, b := range RaspberryPiBoards() {
		if !IsRaspberryPi(b) {
			t.Errorf("IsRaspberryPi(%q) = false", b)
		}
	}
	for _, b := range []string{"sim", "raspberry-pi-6", "raspberrypi", ""} {
		if IsRaspberryPi(b) {
			t.Errorf("IsRaspberryPi(%q) = true", b)
		}
	}
	if _, err := ResolveModel("raspberry-pi-9"); err == nil {
		t.Error("ResolveModel of an unknown board succeeded")
	}
}
