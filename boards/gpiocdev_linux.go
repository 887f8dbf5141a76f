package boards

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The GPIO character device's v2 line request (linux/gpio.h), made here
// rather than through periph's LineSet because the request must carry the
// lines' initial levels: periph's request has no output values, so the
// kernel makes every line an output at low and the levels follow only in
// the next system call. With GPIO_V2_LINE_ATTR_ID_OUTPUT_VALUES in the
// request, gpiolib hands each line's level to the chip driver together
// with the direction (direction_output), so no line is ever written low on
// its way to high (piemu's guest traces it).
//
// The structs below are linux/gpio.h's. Every 64-bit field there is
// __aligned_u64 and every gap is explicit padding, so the layout is the
// same for 64-bit and 32-bit processes (an armv6/7 gateway on a 64-bit Pi
// kernel needs no compat translation), and Go's layout matches it even
// where Go aligns uint64 to 4 bytes (arm, 386). A func _ below fails
// the build for any GOARCH where a size or offset differs.

const (
	gpioMaxNameSize    = 32 // GPIO_MAX_NAME_SIZE
	gpioV2LinesMax     = 64 // GPIO_V2_LINES_MAX
	gpioV2LineNumAttrs = 10 // GPIO_V2_LINE_NUM_ATTRS_MAX

	// GPIO_V2_LINE_FLAG_*
	gpioV2FlagInput        = 1 << 2
	gpioV2FlagOutput       = 1 << 3
	gpioV2FlagEdgeRising   = 1 << 4
	gpioV2FlagEdgeFalling  = 1 << 5
	gpioV2FlagBiasPullUp   = 1 << 8
	gpioV2FlagBiasPullDown = 1 << 9
	gpioV2FlagBiasDisabled = 1 << 10

	// GPIO_V2_LINE_ATTR_ID_*
	gpioV2AttrFlags     = 1
	gpioV2AttrOutValues = 2
	gpioV2AttrDebounce  = 3

	// GPIO_V2_LINE_EVENT_*
	gpioV2EventRisingEdge  = 1
	gpioV2EventFallingEdge = 2
)

// gpioV2LineAttribute is struct gpio_v2_line_attribute; value is the
// union of flags, values and debounce_period_us.
type gpioV2LineAttribute struct {
	id      uint32
	padding uint32
	value   uint64
}

// gpioV2LineConfigAttribute is struct gpio_v2_line_config_attribute.
type gpioV2LineConfigAttribute struct {
	attr gpioV2LineAttribute
	mask uint64 // bit i: the request's line i
}

// gpioV2LineConfig is struct gpio_v2_line_config.
type gpioV2LineConfig struct {
	flags    uint64
	numAttrs uint32
	padding  [5]uint32
	attrs    [gpioV2LineNumAttrs]gpioV2LineConfigAttribute
}

// gpioV2LineRequest is struct gpio_v2_line_request.
type gpioV2LineRequest struct {
	offsets         [gpioV2LinesMax]uint32
	consumer        [gpioMaxNameSize]byte
	config          gpioV2LineConfig
	numLines        uint32
	eventBufferSize uint32
	padding         [5]uint32
	fd              int32
}

// gpioV2LineValues is struct gpio_v2_line_values.
type gpioV2LineValues struct {
	bits uint64
	mask uint64
}

// gpioV2LineEvent is struct gpio_v2_line_event, what a read of an input
// request returns for each edge: the timestamp is CLOCK_MONOTONIC's (the
// request asks for no other clock), offset the line's on its chip.
type gpioV2LineEvent struct {
	timestampNs uint64
	id          uint32 // gpioV2EventRisingEdge or gpioV2EventFallingEdge
	offset      uint32
	seqno       uint32 // in the request
	lineSeqno   uint32 // of the line
	padding     [6]uint32
}

// gpioV2LineEventSize is the size of struct gpio_v2_line_event.
const gpioV2LineEventSize = int(unsafe.Sizeof(gpioV2LineEvent{}))

// The ioctls, _IOWR(0xB4, nr, struct): the same encoding on arm, arm64
// and amd64 (asm-generic/ioctl.h).
const (
	gpioV2GetLineIoctl   = 3<<30 | unsafe.Sizeof(gpioV2LineRequest{})<<16 | 0xB4<<8 | 0x07 // GPIO_V2_GET_LINE_IOCTL
	gpioV2GetValuesIoctl = 3<<30 | unsafe.Sizeof(gpioV2LineValues{})<<16 | 0xB4<<8 | 0x0E  // GPIO_V2_LINE_GET_VALUES_IOCTL
	gpioV2SetValuesIoctl = 3<<30 | unsafe.Sizeof(gpioV2LineValues{})<<16 | 0xB4<<8 | 0x0F  // GPIO_V2_LINE_SET_VALUES_IOCTL
)

// This function never runs: it fails to compile, with "invalid argument:
// index … out of bounds" or "constant … overflows uintptr", when a size,
// offset or ioctl number above differs from linux/gpio.h's (measured with
// gcc against linux-libc-dev 6.1's header), on whatever GOARCH is built.
func _() {
	var x [1]struct{}
	_ = x[unsafe.Sizeof(gpioV2LineAttribute{})-16]
	_ = x[unsafe.Offsetof(gpioV2LineAttribute{}.value)-8]
	_ = x[unsafe.Sizeof(gpioV2LineConfigAttribute{})-24]
	_ = x[unsafe.Offsetof(gpioV2LineConfigAttribute{}.mask)-16]
	_ = x[unsafe.Sizeof(gpioV2LineConfig{})-272]
	_ = x[unsafe.Offsetof(gpioV2LineConfig{}.numAttrs)-8]
	_ = x[unsafe.Offsetof(gpioV2LineConfig{}.attrs)-32]
	_ = x[unsafe.Sizeof(gpioV2LineRequest{})-592]
	_ = x[unsafe.Offsetof(gpioV2LineRequest{}.consumer)-256]
	_ = x[unsafe.Offsetof(gpioV2LineRequest{}.config)-288]
	_ = x[unsafe.Offsetof(gpioV2LineRequest{}.numLines)-560]
	_ = x[unsafe.Offsetof(gpioV2LineRequest{}.eventBufferSize)-564]
	_ = x[unsafe.Offsetof(gpioV2LineRequest{}.padding)-568]
	_ = x[unsafe.Offsetof(gpioV2LineRequest{}.fd)-588]
	_ = x[unsafe.Sizeof(gpioV2LineValues{})-16]
	_ = x[unsafe.Offsetof(gpioV2LineValues{}.mask)-8]
	_ = x[unsafe.Sizeof(gpioV2LineEvent{})-48]
	_ = x[unsafe.Offsetof(gpioV2LineEvent{}.id)-8]
	_ = x[unsafe.Offsetof(gpioV2LineEvent{}.offset)-12]
	_ = x[unsafe.Offsetof(gpioV2LineEvent{}.seqno)-16]
	_ = x[unsafe.Offsetof(gpioV2LineEvent{}.lineSeqno)-20]
	_ = x[unsafe.Offsetof(gpioV2LineEvent{}.padding)-24]
	_ = x[gpioV2GetLineIoctl-0xc250b407]
	_ = x[gpioV2GetValuesIoctl-0xc010b40e]
	_ = x[gpioV2SetValuesIoctl-0xc010b40f]
}

// gpioConsumer is the consumer label of our requests, as periph's
// gpioioctl gives its own: the program's name and process id, which
// gpioinfo shows and the kernel keeps to 31 bytes.
func gpioConsumer() string {
	s := fmt.Sprintf("%s@%d", filepath.Base(os.Args[0]), os.Getpid())
	if len(s) > gpioMaxNameSize-1 {
		s = s[:gpioMaxNameSize-1]
	}
	return s
}

// lineRequest is a held GPIO v2 line request: its lines are outputs, or
// inputs, owned by this process until close.
type lineRequest struct {
	f *os.File
}

// requestOutputs requests the lines at offsets on the chip at chipPath as
// outputs, line i at level high&(1<<i) from the first moment, in one
// request.
func requestOutputs(chipPath string, offsets []uint32, high uint64) (*lineRequest, error) {
	if err := requestSize(len(offsets)); err != nil {
		return nil, err
	}
	all := uint64(1)<<len(offsets) - 1 // len 64: 0 - 1, every bit
	config := gpioV2LineConfig{flags: gpioV2FlagOutput, numAttrs: 1}
	config.attrs[0] = gpioV2LineConfigAttribute{
		attr: gpioV2LineAttribute{id: gpioV2AttrOutValues, value: high & all},
		mask: all,
	}
	return request(chipPath, offsets, config, false)
}

// requestInputs requests the lines at offsets on the chip at chipPath as
// inputs (inputConfig), in one request whose edge events a read returns
// and whose reads Close interrupts.
func requestInputs(chipPath string, offsets []uint32, lines []InputLine) (*lineRequest, error) {
	if err := requestSize(len(offsets)); err != nil {
		return nil, err
	}
	config, err := inputConfig(lines)
	if err != nil {
		return nil, err
	}
	return request(chipPath, offsets, config, true)
}

func requestSize(n int) error {
	if n == 0 || n > gpioV2LinesMax {
		return fmt.Errorf("boards: %d lines in one request; the kernel takes 1 to %d", n, gpioV2LinesMax)
	}
	return nil
}

// inputConfig is the line config of an input request: every line an input
// with both edges detected (a change is reported, or not, by its Edge
// after the read), its bias, and its debounce period. The request's flags
// are the first line's; lines with another pull, and lines with a
// debounce period, get attributes, one per pull and one per period.
func inputConfig(lines []InputLine) (gpioV2LineConfig, error) {
	var c gpioV2LineConfig
	if len(lines) == 0 {
		return c, fmt.Errorf("boards: no input lines")
	}
	c.flags = inputFlags(lines[0].Pull)
	var attrs []gpioV2LineAttribute
	var masks []uint64
	add := func(a gpioV2LineAttribute, bit uint64) {
		for i := range attrs {
			if attrs[i] == a {
				masks[i] |= bit
				return
			}
		}
		attrs, masks = append(attrs, a), append(masks, bit)
	}
	for i, l := range lines {
		if f := inputFlags(l.Pull); f != c.flags {
			add(gpioV2LineAttribute{id: gpioV2AttrFlags, value: f}, 1<<i)
		}
	}
	for i, l := range lines {
		if l.Debounce > 0 {
			us := (l.Debounce + time.Microsecond - 1) / time.Microsecond
			add(gpioV2LineAttribute{id: gpioV2AttrDebounce, value: uint64(us)}, 1<<i)
		}
	}
	if len(attrs) > gpioV2LineNumAttrs {
		return c, fmt.Errorf("boards: these %d inputs need %d line attributes (one for each pull besides the first input's, one for each debounce period), and the kernel takes %d in one request: give inputs on one chip fewer different debounce periods",
			len(lines), len(attrs), gpioV2LineNumAttrs)
	}
	c.numAttrs = uint32(len(attrs))
	for i, a := range attrs {
		c.attrs[i] = gpioV2LineConfigAttribute{attr: a, mask: masks[i]}
	}
	return c, nil
}

// inputFlags are an input's line flags for its pull: PullNone disables
// the bias, rather than leaving whatever a previous user set.
func inputFlags(p Pull) uint64 {
	f := uint64(gpioV2FlagInput | gpioV2FlagEdgeRising | gpioV2FlagEdgeFalling)
	switch p {
	case PullUp:
		return f | gpioV2FlagBiasPullUp
	case PullDown:
		return f | gpioV2FlagBiasPullDown
	}
	return f | gpioV2FlagBiasDisabled
}

// request makes the line request. A nonblocking request's file is in Go's
// poller, so that closing it ends a read that waits for an event.
func request(chipPath string, offsets []uint32, config gpioV2LineConfig, nonblock bool) (*lineRequest, error) {
	chip, err := os.Open(chipPath)
	if err != nil {
		return nil, err
	}
	defer chip.Close()
	var req gpioV2LineRequest
	copy(req.offsets[:], offsets)
	copy(req.consumer[:gpioMaxNameSize-1], gpioConsumer())
	req.numLines = uint32(len(offsets))
	req.config = config
	if err := ioctl(chip, gpioV2GetLineIoctl, unsafe.Pointer(&req)); err != nil {
		return nil, fmt.Errorf("GPIO_V2_GET_LINE on %s: %w", chipPath, err)
	}
	if req.fd <= 0 {
		return nil, fmt.Errorf("GPIO_V2_GET_LINE on %s: the kernel returned no file descriptor (%d)", chipPath, req.fd)
	}
	// The kernel opens the request's descriptor with O_CLOEXEC.
	name := chipPath + " line request"
	if !nonblock {
		return &lineRequest{f: os.NewFile(uintptr(req.fd), name)}, nil
	}
	f, err := pollable(int(req.fd), name)
	if err != nil {
		return nil, fmt.Errorf("GPIO_V2_GET_LINE on %s: %w", chipPath, err)
	}
	return &lineRequest{f: f}, nil
}

// pollable makes fd an *os.File in Go's poller: a read waits in the
// poller, not in the kernel, so that Close ends it (a blocking descriptor's
// read would hold it open until a byte came). It closes fd if it fails.
func pollable(fd int, name string) (*os.File, error) {
	if err := syscall.SetNonblock(fd, true); err != nil {
		syscall.Close(fd)
		return nil, fmt.Errorf("O_NONBLOCK: %w", err)
	}
	return os.NewFile(uintptr(fd), name), nil
}

// readEvents waits for edge events and returns those one read gives (buf
// holds them: a whole number of events); an error once the request is
// closed.
func (r *lineRequest) readEvents(buf []byte) ([]gpioV2LineEvent, error) {
	n, err := r.f.Read(buf)
	if err != nil {
		return nil, err
	}
	return decodeEvents(buf[:n])
}

// decodeEvents decodes struct gpio_v2_line_event, in the machine's byte
// order, as the kernel writes them.
func decodeEvents(b []byte) ([]gpioV2LineEvent, error) {
	if len(b)%gpioV2LineEventSize != 0 {
		return nil, fmt.Errorf("boards: read %d bytes of line events, not a whole number of %d-byte events", len(b), gpioV2LineEventSize)
	}
	evs := make([]gpioV2LineEvent, 0, len(b)/gpioV2LineEventSize)
	for ; len(b) > 0; b = b[gpioV2LineEventSize:] {
		e := gpioV2LineEvent{
			timestampNs: binary.NativeEndian.Uint64(b[0:]),
			id:          binary.NativeEndian.Uint32(b[8:]),
			offset:      binary.NativeEndian.Uint32(b[12:]),
			seqno:       binary.NativeEndian.Uint32(b[16:]),
			lineSeqno:   binary.NativeEndian.Uint32(b[20:]),
		}
		evs = append(evs, e)
	}
	return evs, nil
}

// eventTime converts an event's CLOCK_MONOTONIC timestamp to a time.Time
// (with Go's monotonic reading): now, less how long ago the kernel took
// the timestamp.
func eventTime(timestampNs uint64) time.Time {
	var ts unix.Timespec
	err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	now := time.Now()
	if err != nil {
		return now
	}
	return eventTimeAt(timestampNs, ts.Nano(), now)
}

// eventTimeAt is eventTime with CLOCK_MONOTONIC at monoNow when the clock
// read now. A timestamp after monoNow counts as now.
func eventTimeAt(timestampNs uint64, monoNow int64, now time.Time) time.Time {
	ago := monoNow - int64(timestampNs)
	if ago < 0 {
		ago = 0
	}
	return now.Add(-time.Duration(ago))
}

// set drives the lines in mask to bits.
func (r *lineRequest) set(bits, mask uint64) error {
	v := gpioV2LineValues{bits: bits, mask: mask}
	return ioctl(r.f, gpioV2SetValuesIoctl, unsafe.Pointer(&v))
}

// get reads the levels of the lines in mask (an output stays an output;
// an input with a debounce period gives its debounced level).
func (r *lineRequest) get(mask uint64) (uint64, error) {
	v := gpioV2LineValues{mask: mask}
	err := ioctl(r.f, gpioV2GetValuesIoctl, unsafe.Pointer(&v))
	return v.bits & mask, err
}

// close releases the lines; the kernel leaves them at their last level.
func (r *lineRequest) close() error { return r.f.Close() }

// ioctl calls ioctl(2) on f's descriptor, which stays open meanwhile (a
// closed f gives os.ErrClosed, never another file's descriptor).
func ioctl(f *os.File, req uintptr, arg unsafe.Pointer) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var errno syscall.Errno
	if err := rc.Control(func(fd uintptr) {
		_, _, errno = syscall.Syscall(syscall.SYS_IOCTL, fd, req, uintptr(arg))
	}); err != nil {
		return err
	}
	if errno != 0 {
		return errno
	}
	return nil
}
