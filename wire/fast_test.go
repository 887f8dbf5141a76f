package wire

import (
	"reflect"
	"testing"

	"github.com/fencegate/fencegate/fence"
)

// The commands controllers send (EncodeCommand's, signed or not) take the
// fast path, and it decodes them as the streaming decoder does.
func TestPlainCommandsDecodeFast(t *testing.T) {
	sig := make([]byte, SigSize)
	for i := range sig {
		sig[i] = byte(i * 7)
	}
	for _, c := range []fence.Command{
		{ID: "b-7", Holder: "controller-b", Fence: fence.Fence{Token: 42, Seq: 3}, State: fence.StateOn},
		{ID: "fence-only", Fence: fence.Fence{Token: fence.MaxToken, Seq: fence.MaxSeq}},
		{ID: "ünïcode ✓", Holder: "h", Fence: fence.Fence{Token: 1}, State: fence.StateOff, Signer: "ctl-a", Sig: sig},
	} {
		payload := EncodeCommand(c)
		fast, ok := decodeFast("pump", payload)
		if !ok {
			t.Errorf("%s: not decoded by the fast path", payload)
			continue
		}
		slow, err := decodeCommandRef("pump", payload)
		if err != nil || !reflect.DeepEqual(fast, slow) {
			t.Errorf("%s: fast %+v, streaming %+v, %v", payload, fast, slow, err)
		}
	}
	payload := EncodeCommand(fence.Command{ID: "b-7", Holder: "controller-b", Fence: fence.Fence{Token: 42, Seq: 3}, State: fence.StateOn})
	if n := testing.AllocsPerRun(100, func() { DecodeCommand("pump", payload) }); n > 3 {
		t.Errorf("DecodeCommand of an ordinary command: %v allocations, want at most 3 (its id and holder, and the error's none)", n)
	}
}
