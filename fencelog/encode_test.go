package fencelog

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/fencegate/fencegate/fence"
)

// encodeScope writes exactly what json.Marshal writes, for records with
// every field set or empty, strings that need escaping (quotes, control
// characters, HTML characters, non-ASCII, invalid UTF-8), extreme numbers
// and times.
func TestEncodeScopeIsJSONMarshal(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	str, u64, at := randomValues(rng)
	for i := range 2000 {
		rec := record{Fence: fence.Fence{Token: u64(), Seq: u64()}}
		for range rng.IntN(fence.Window + 1) {
			a := fence.AppliedCommand{ID: str(), Actuator: str(), Fence: fence.Fence{Token: u64(), Seq: u64()}, State: fence.State(rng.IntN(4))}
			if rng.IntN(4) == 0 {
				a.Refused = &fence.Refusal{Reason: str(), Error: str(), Blocker: str()}
			}
			if rng.IntN(20) == 0 {
				a.Pulse, a.PulseStatus = time.Duration(u64()), str()
			}
			rec.Recent = append(rec.Recent, a)
		}
		if i%7 == 0 {
			rec.Recent = []fence.AppliedCommand{} // empty, not nil: omitted too
		}
		if n := rng.IntN(5); n > 0 || i%5 == 0 {
			rec.Outputs = map[string]outputRecord{}
			for range n {
				o := outputRecord{State: fence.State(rng.IntN(3)), Holder: str(), ChangedAt: at(), Why: str()}
				if rng.IntN(9) == 0 {
					o.Pulse = &fence.Pulse{ID: str(), Fence: fence.Fence{Token: u64()}, Width: time.Duration(u64()), Status: str()}
				}
				rec.Outputs[str()] = o
			}
		}
		want, err := json.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		got, err := encodeScope(rec)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("record %d:\n got %s\nwant %s", i, got, want)
		}
	}
	// A time json.Marshal refuses is refused the same.
	bad := record{Outputs: map[string]outputRecord{"a": {ChangedAt: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}}}
	_, werr := json.Marshal(bad)
	if _, err := encodeScope(bad); (err == nil) != (werr == nil) {
		t.Errorf("year 10000: encodeScope error %v, json.Marshal error %v", err, werr)
	}
}

func BenchmarkEncodeScope(b *testing.B) {
	rec := record{Fence: fence.Fence{Token: 42, Seq: 7}, Outputs: map[string]outputRecord{"pump": {State: fence.StateOn, Holder: "controller-b", ChangedAt: time.Now()}}}
	for i := range fence.Window {
		rec.Recent = append(rec.Recent, fence.AppliedCommand{ID: "cmd-" + string(rune('a'+i%26)), Actuator: "pump", Fence: fence.Fence{Token: 42, Seq: uint64(i)}, State: fence.StateOn})
	}
	b.Run("json.Marshal", func(b *testing.B) {
		for b.Loop() {
			json.Marshal(rec)
		}
	})
	b.Run("encodeScope", func(b *testing.B) {
		for b.Loop() {
			encodeScope(rec)
		}
	})
}

// encodeEntry writes exactly what json.Marshal writes, for audit entries
// with every field set or empty, strings that need escaping, extreme
// numbers and times.
func TestEncodeEntryIsJSONMarshal(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	str, u64, at := randomValues(rng)
	outcomes := []fence.Outcome{"", fence.Applied, fence.Stale, OutcomeInterlock, "a\"b"}
	for i := range 3000 {
		e := Entry{Seq: u64(), At: at(), Scope: str(), Actuator: str(), ID: str(), Holder: str(),
			Command: fence.Fence{Token: u64(), Seq: u64()}, State: fence.State(rng.IntN(4)), Outcome: outcomes[rng.IntN(len(outcomes))],
			Reason: str(), Fence: fence.Fence{Token: u64(), Seq: u64()}, Error: str(), Signer: str()}
		want, werr := json.Marshal(e)
		got, gerr := encodeEntry(e)
		if (werr == nil) != (gerr == nil) || !bytes.Equal(got, want) && werr == nil {
			t.Fatalf("entry %d:\n got %s, %v\nwant %s, %v", i, got, gerr, want, werr)
		}
	}
	for _, at := range []time.Time{time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC)} {
		if _, err := encodeEntry(Entry{At: at}); err == nil {
			t.Errorf("an entry at %v encoded; json.Marshal refuses it", at)
		}
	}
}

// randomValues returns, drawn from rng, the strings, numbers and times the
// encoders' tests try: strings that need escaping (quotes, control
// characters, HTML characters, non-ASCII, invalid UTF-8), the extreme
// numbers, zero, UTC, offset and epoch times.
func randomValues(rng *rand.Rand) (str func() string, u64 func() uint64, at func() time.Time) {
	strs := []string{"", "pump", "a\"b", "back\\slash", "tab\there", "<html>&", "héllo", "\xff\xfe", "\u2028", "新", "x\x00y"}
	times := []time.Time{{}, time.Date(2026, 12, 3, 7, 24, 48, 123456789, time.UTC), time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 3600)), time.Unix(0, 0).UTC()}
	str = func() string { return strs[rng.IntN(len(strs))] }
	u64 = func() uint64 {
		switch rng.IntN(3) {
		case 0:
			return 0
		case 1:
			return math.MaxUint64
		}
		return rng.Uint64N(1 << 40)
	}
	at = func() time.Time { return times[rng.IntN(len(times))] }
	return str, u64, at
}
