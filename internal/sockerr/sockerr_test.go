package sockerr

import (
	"errors"
	"net"
	"testing"
)

// A second listener on a taken port fails with an error AddrInUse knows;
// other errors are not mistaken for it.
func TestAddrInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, err = net.Listen("tcp", ln.Addr().String())
	if err == nil || !AddrInUse(err) {
		t.Errorf("AddrInUse(%v) = false, want true", err)
	}
	if AddrInUse(errors.New("address already in use")) || AddrInUse(nil) {
		t.Error("AddrInUse is true for an error that is not the socket error")
	}
}
