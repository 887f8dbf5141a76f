package testenv

import (
	"encoding/binary"
	"fmt"
	"syscall"
	"unsafe"
)

// LoopbackUp sets IFF_UP on lo, as a new network namespace (or a bare
// initramfs) needs before anything can listen on 127.0.0.1; the kernel then
// gives lo 127.0.0.1/8 and ::1.
func LoopbackUp() error {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_DGRAM, 0)
	if err != nil {
		return fmt.Errorf("testenv: loopback: socket: %w", err)
	}
	defer syscall.Close(fd)
	var ifr [40]byte // struct ifreq: name[16], then ifr_flags (short)
	copy(ifr[:], "lo")
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), syscall.SIOCGIFFLAGS, uintptr(unsafe.Pointer(&ifr[0]))); e != 0 {
		return fmt.Errorf("testenv: loopback: SIOCGIFFLAGS lo: %w", e)
	}
	flags := binary.NativeEndian.Uint16(ifr[16:])
	binary.NativeEndian.PutUint16(ifr[16:], flags|syscall.IFF_UP)
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), syscall.SIOCSIFFLAGS, uintptr(unsafe.Pointer(&ifr[0]))); e != 0 {
		return fmt.Errorf("testenv: loopback: SIOCSIFFLAGS lo up: %w", e)
	}
	return nil
}
