package wire

import (
	"os"
	"strings"
	"syscall"
	"testing"
)

// TestDecodeCommandReadsNoFurtherThanTheLimit: the decoder
// scanned a whole payload (UTF-8 check, JSON parse for the id) before its
// size check, so that a 64 MB command cost the gateway time in proportion
// and a receiver had to hold all of it. It must refuse an oversized
// payload having read no more than MaxPayload bytes of it, and still
// answer with its id. The payload lies in memory whose every page after
// the first MaxPayload bytes is unreadable: a decoder that reads past the
// limit crashes the test.
func TestDecodeCommandReadsNoFurtherThanTheLimit(t *testing.T) {
	const size = 64 << 20
	page := os.Getpagesize()
	mem, err := syscall.Mmap(-1, 0, size+page, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Fatalf("mmap: %v", err)
	}
	defer syscall.Munmap(mem)
	// The payload starts MaxPayload bytes before a page boundary.
	off := page - MaxPayload
	payload := mem[off : off+size]
	head := `{"id":"huge-1","token":5,"state":"on","holder":"`
	copy(payload, head+strings.Repeat("x", MaxPayload-len(head)))
	if err := syscall.Mprotect(mem[page:], syscall.PROT_NONE); err != nil {
		t.Fatalf("mprotect: %v", err)
	}
	c, err := DecodeCommand("pump", payload)
	if want := "payload is 67108864 bytes; the limit is 1024"; err == nil || err.Error() != want {
		t.Errorf("DecodeCommand(64 MB) error = %v, want %q", err, want)
	}
	if c.ID != "huge-1" {
		t.Errorf("DecodeCommand(64 MB).ID = %q, want huge-1 (read from its first bytes)", c.ID)
	}
}
