package wire

import (
	"testing"

	"github.com/fencegate/fencegate/fence"
)

// The gateway decodes every command and encodes every answer: these
// benchmarks give their cost and allocations per message (make bench runs
// them with -benchmem). Compare fencelog's BenchmarkAdmitApplied and
// BenchmarkAdmitStale, the decision itself.

// benchCommand is a typical command, as gateway bench sends them.
var benchCommand = []byte(`{"id":"bench-4711-c03-1234","token":2,"seq":1234,"state":"on","holder":"bench"}`)

func BenchmarkDecodeCommand(b *testing.B) {
	b.ReportAllocs()
	b.SetBytes(int64(len(benchCommand)))
	for b.Loop() {
		c, err := DecodeCommand("a03", benchCommand)
		if err != nil || c.Fence.Seq != 1234 {
			b.Fatalf("DecodeCommand = %+v, %v", c, err)
		}
	}
}

func BenchmarkEncodeResult(b *testing.B) {
	r := fence.Result{ID: "bench-4711-c03-1234", Actuator: "a03", Outcome: fence.Applied,
		Command: fence.Fence{Token: 2, Seq: 1234}, Fence: fence.Fence{Token: 2, Seq: 1234}, State: fence.StateOn}
	b.ReportAllocs()
	for b.Loop() {
		if p := EncodeResult(r); len(p) == 0 {
			b.Fatal("EncodeResult: empty")
		}
	}
}

// BenchmarkEncodeResultStale is the answer to a stale command, with its
// error text.
func BenchmarkEncodeResultStale(b *testing.B) {
	r := fence.Result{ID: "bench-4711-c00-99", Actuator: "a00", Outcome: fence.Stale,
		Command: fence.Fence{Token: 1, Seq: 99}, Fence: fence.Fence{Token: 2, Seq: 1234}, State: fence.StateOn,
		Error: "token 1 seq 99 is below the fence 2/1234; reread state"}
	b.ReportAllocs()
	for b.Loop() {
		if p := EncodeResult(r); len(p) == 0 {
			b.Fatal("EncodeResult: empty")
		}
	}
}

// BenchmarkEncodeCommand and BenchmarkDecodeResult are the controller's
// side of the same messages.
func BenchmarkEncodeCommand(b *testing.B) {
	c := fence.Command{ID: "bench-4711-c03-1234", Actuator: "a03", Holder: "bench", Fence: fence.Fence{Token: 2, Seq: 1234}, State: fence.StateOn}
	b.ReportAllocs()
	for b.Loop() {
		if p := EncodeCommand(c); len(p) == 0 {
			b.Fatal("EncodeCommand: empty")
		}
	}
}

func BenchmarkDecodeResult(b *testing.B) {
	p := EncodeResult(fence.Result{ID: "bench-4711-c03-1234", Actuator: "a03", Outcome: fence.Applied,
		Command: fence.Fence{Token: 2, Seq: 1234}, Fence: fence.Fence{Token: 2, Seq: 1234}, State: fence.StateOn})
	b.ReportAllocs()
	for b.Loop() {
		if r, err := DecodeResult(p); err != nil || r.Outcome != fence.Applied {
			b.Fatalf("DecodeResult = %+v, %v", r, err)
		}
	}
}
