package boards

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"github.com/fencegate/fencegate/boards/pinmap"
)

// TestGPIOUAPILayout checks the line request's structs against
// linux/gpio.h (sizes and offsets measured with gcc on linux-libc-dev
// 6.1's header; every 64-bit field there is __aligned_u64, so they hold
// for 32-bit processes too). The same numbers are checked at compile time
// in gpiocdev_linux.go, which fails the build on any GOARCH; this test
// shows them and runs on the GOARCH it is built for
// (GOARCH=386 go test ./boards runs the 4-byte-aligned uint64 case on an
// amd64 host).
func TestGPIOUAPILayout(t *testing.T) {
	var (
		attr   gpioV2LineAttribute
		cattr  gpioV2LineConfigAttribute
		config gpioV2LineConfig
		req    gpioV2LineRequest
		values gpioV2LineValues
		event  gpioV2LineEvent
	)
	for _, c := range []struct {
		what      string
		got, want uintptr
	}{
		{"sizeof(struct gpio_v2_line_attribute)", unsafe.Sizeof(attr), 16},
		{"offsetof(gpio_v2_line_attribute, padding)", unsafe.Offsetof(attr.padding), 4},
		{"offsetof(gpio_v2_line_attribute, values)", unsafe.Offsetof(attr.value), 8},
		{"sizeof(struct gpio_v2_line_config_attribute)", unsafe.Sizeof(cattr), 24},
		{"offsetof(gpio_v2_line_config_attribute, mask)", unsafe.Offsetof(cattr.mask), 16},
		{"sizeof(struct gpio_v2_line_config)", unsafe.Sizeof(config), 272},
		{"offsetof(gpio_v2_line_config, num_attrs)", unsafe.Offsetof(config.numAttrs), 8},
		{"offsetof(gpio_v2_line_config, padding)", unsafe.Offsetof(config.padding), 12},
		{"offsetof(gpio_v2_line_config, attrs)", unsafe.Offsetof(config.attrs), 32},
		{"sizeof(struct gpio_v2_line_request)", unsafe.Sizeof(req), 592},
		{"offsetof(gpio_v2_line_request, consumer)", unsafe.Offsetof(req.consumer), 256},
		{"offsetof(gpio_v2_line_request, config)", unsafe.Offsetof(req.config), 288},
		{"offsetof(gpio_v2_line_request, num_lines)", unsafe.Offsetof(req.numLines), 560},
		{"offsetof(gpio_v2_line_request, event_buffer_size)", unsafe.Offsetof(req.eventBufferSize), 564},
		{"offsetof(gpio_v2_line_request, padding)", unsafe.Offsetof(req.padding), 568},
		{"offsetof(gpio_v2_line_request, fd)", unsafe.Offsetof(req.fd), 588},
		{"sizeof(struct gpio_v2_line_values)", unsafe.Sizeof(values), 16},
		{"offsetof(gpio_v2_line_values, mask)", unsafe.Offsetof(values.mask), 8},
		{"sizeof(struct gpio_v2_line_event)", unsafe.Sizeof(event), 48},
		{"offsetof(gpio_v2_line_event, id)", unsafe.Offsetof(event.id), 8},
		{"offsetof(gpio_v2_line_event, offset)", unsafe.Offsetof(event.offset), 12},
		{"offsetof(gpio_v2_line_event, seqno)", unsafe.Offsetof(event.seqno), 16},
		{"offsetof(gpio_v2_line_event, line_seqno)", unsafe.Offsetof(event.lineSeqno), 20},
		{"offsetof(gpio_v2_line_event, padding)", unsafe.Offsetof(event.padding), 24},
		{"GPIO_V2_GET_LINE_IOCTL", gpioV2GetLineIoctl, 0xc250b407},
		{"GPIO_V2_LINE_GET_VALUES_IOCTL", gpioV2GetValuesIoctl, 0xc010b40e},
		{"GPIO_V2_LINE_SET_VALUES_IOCTL", gpioV2SetValuesIoctl, 0xc010b40f},
	} {
		if c.got != c.want {
			t.Errorf("%s/%s: %s = %#x in Go, %#x in linux/gpio.h", runtime.GOOS, runtime.GOARCH, c.what, c.got, c.want)
		}
	}
}

// A request the kernel would refuse (no line, or more than 64) is refused
// before the chip is opened.
func TestRequestOutputsBadInput(t *testing.T) {
	for _, n := range []int{0, gpioV2LinesMax + 1} {
		_, err := requestOutputs("/nonexistent/gpiochip", make([]uint32, n), 0)
		if err == nil || !strings.Contains(err.Error(), "the kernel takes 1 to 64") {
			t.Errorf("requestOutputs(%d lines) = %v, want the count refused", n, err)
		}
	}
	_, err := requestOutputs("/nonexistent/gpiochip", []uint32{17}, 1)
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("requestOutputs on a missing chip = %v, want os.ErrNotExist", err)
	}
}

// A closed board's pins fail with an error that says so, and never touch
// the closed descriptor; closing again does nothing.
func TestRaspberryPiClosed(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	p := &RaspberryPi{Model: pinmap.Model{Name: "Raspberry Pi 3 Model B"}, Chip: "pinctrl-bcm2835",
		reqs: []*heldRequest{{chip: "pinctrl-bcm2835", req: &lineRequest{f: r}}}, index: map[string]lineRef{"GPIO17": {req: 0, bit: 1}}}
	pin, err := p.Pin("PIN11")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := p.Close(); err != nil {
			t.Fatalf("Close %d: %v", i+1, err)
		}
	}
	if err := pin.Out(true); err == nil || !strings.Contains(err.Error(), "boards: drive GPIO17") || !errors.Is(err, errClosed) {
		t.Errorf("Out after Close = %v, want the board is closed", err)
	}
	if _, err := pin.Level(); err == nil || !strings.Contains(err.Error(), "boards: read GPIO17") || !errors.Is(err, errClosed) {
		t.Errorf("Level after Close = %v, want the board is closed", err)
	}
}

// A chip named with its address (mcp23017@20) is the one whose device,
// as sysfs links it, is at that address on its bus.
func TestChipAddress(t *testing.T) {
	sys := t.TempDir()
	devs := filepath.Join(sys, "bus", "gpio", "devices")
	if err := os.MkdirAll(devs, 0o755); err != nil {
		t.Fatal(err)
	}
	for chip, dev := range map[string]string{
		"gpiochip2": "devices/platform/soc/fe804000.i2c/i2c-1/1-0020/gpiochip2",
		"gpiochip3": "devices/platform/soc/fe804000.i2c/i2c-1/1-0021/gpiochip3",
		"gpiochip4": "devices/platform/soc/fe204000.spi/spi_master/spi0/spi0.0/gpiochip4",
	} {
		if err := os.MkdirAll(filepath.Join(sys, dev), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join(sys, dev), filepath.Join(devs, chip)); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		chip, addr string
		want       bool
	}{
		{"gpiochip2", "20", true}, {"gpiochip2", "0x20", true}, {"gpiochip2", "0X20", true},
		{"gpiochip2", "21", false}, {"gpiochip3", "21", true}, {"gpiochip3", "1-0021", true},
		{"gpiochip4", "spi0.0", true}, {"gpiochip4", "0", false}, {"gpiochip9", "20", false},
		{"gpiochip2", "", false}, {"gpiochip2", "zz", false},
	} {
		if got := sameAddress(busAddress(devs, c.chip), c.addr); got != c.want {
			t.Errorf("%s@%s: got %v, want %v (device %q)", c.chip, c.addr, got, c.want, busAddress(devs, c.chip))
		}
	}
}
