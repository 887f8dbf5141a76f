package boards

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"unsafe"
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
	gpioMaxNameSize     = 32 // GPIO_MAX_NAME_SIZE
	gpioV2LinesMax      = 64 // GPIO_V2_LINES_MAX
	gpioV2LineNumAttrs  = 10 // GPIO_V2_LINE_NUM_ATTRS_MAX
	gpioV2FlagOutput    = 1 << 3
	gpioV2AttrOutValues = 2 // GPIO_V2_LINE_ATTR_ID_OUTPUT_VALUES
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

// lineRequest is a held GPIO v2 line request: its lines are outputs owned
// by this process until close.
type lineRequest struct {
	f *os.File
}

// requestOutputs requests the lines at offsets on the chip at chipPath as
// outputs, line i at level high&(1<<i) from the first moment, in one
// request.
func requestOutputs(chipPath string, offsets []uint32, high uint64) (*lineRequest, error) {
	if len(offsets) == 0 || len(offsets) > gpioV2LinesMax {
		return nil, fmt.Errorf("boards: %d lines in one request; the kernel takes 1 to %d", len(offsets), gpioV2LinesMax)
	}
	chip, err := os.Open(chipPath)
	if err != nil {
		return nil, err
	}
	defer chip.Close()
	var req gpioV2LineRequest
	copy(req.offsets[:], offsets)
	copy(req.consumer[:gpioMaxNameSize-1], gpioConsumer())
	req.numLines = uint32(len(offsets))
	all := uint64(1)<<len(offsets) - 1 // len 64: 0 - 1, every bit
	req.config.flags = gpioV2FlagOutput
	req.config.numAttrs = 1
	req.config.attrs[0] = gpioV2LineConfigAttribute{
		attr: gpioV2LineAttribute{id: gpioV2AttrOutValues, value: high & all},
		mask: all,
	}
	if err := ioctl(chip, gpioV2GetLineIoctl, unsafe.Pointer(&req)); err != nil {
		return nil, fmt.Errorf("GPIO_V2_GET_LINE on %s: %w", chipPath, err)
	}
	if req.fd <= 0 {
		return nil, fmt.Errorf("GPIO_V2_GET_LINE on %s: the kernel returned no file descriptor (%d)", chipPath, req.fd)
	}
	// The kernel opens the request's descriptor with O_CLOEXEC.
	return &lineRequest{f: os.NewFile(uintptr(req.fd), chipPath+" line request")}, nil
}

// set drives the lines in mask to bits.
func (r *lineRequest) set(bits, mask uint64) error {
	v := gpioV2LineValues{bits: bits, mask: mask}
	return ioctl(r.f, gpioV2SetValuesIoctl, unsafe.Pointer(&v))
}

// get reads the levels of the lines in mask; the lines stay outputs.
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
