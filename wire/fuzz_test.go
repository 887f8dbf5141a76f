package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/fencegate/fencegate/fence"
)

// The fuzz targets of the wire protocol: what a hostile publisher controls
// is a command's payload and its topic. Their seed corpora are the tables
// of wire_test.go and the files in testdata/fuzz (oversized payloads, deep
// nesting, invalid UTF-8, integers past 2^63, floats, negative numbers,
// duplicate keys, wrong types, signed-command fields, topic tricks);
// `go test` runs every seed, `make fuzz` fuzzes each target briefly.

// FuzzDecodeCommand checks that DecodeCommand never panics, that what it
// refuses it explains, that what it accepts is within the protocol's
// limits and agrees with encoding/json on a payload without duplicate
// keys, and that EncodeCommand inverts it.
func FuzzDecodeCommand(f *testing.F) {
	for _, tt := range validCommands {
		f.Add([]byte(tt.payload))
	}
	for _, tt := range badCommands {
		f.Add([]byte(tt.payload))
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		r, err := DecodeRequest("pump", payload)
		if rc, rerr := decodeCommandRef("pump", payload); !reflect.DeepEqual(r, rc) || fmt.Sprint(err) != fmt.Sprint(rerr) {
			t.Fatalf("DecodeRequest(%q) = %+v, %v; as the reference: %+v, %v", payload, r, err, rc, rerr)
		}
		c := r.Command
		if c.Actuator != "pump" {
			t.Fatalf("DecodeCommand(%q).Actuator = %q, want %q", payload, c.Actuator, "pump")
		}
		if len(c.ID) > MaxText || !utf8.ValidString(c.ID) {
			t.Fatalf("DecodeCommand(%q).ID = %q, want valid UTF-8 of at most %d bytes", payload, c.ID, MaxText)
		}
		if err != nil {
			// The error is the answer's text: it says something, in UTF-8
			// (the answer is JSON), and does not repeat a payload back.
			if msg := err.Error(); msg == "" || !utf8.ValidString(msg) || len(msg) > 2*MaxPayload {
				t.Fatalf("DecodeCommand(%q) error = %q, want a short, non-empty UTF-8 explanation", payload, msg)
			}
			return
		}
		if len(payload) > MaxPayload || !utf8.Valid(payload) {
			t.Fatalf("DecodeCommand(%q) accepted a payload of %d bytes or of invalid UTF-8", payload, len(payload))
		}
		if c.Fence.Token < 1 || c.Fence.Token > fence.MaxToken {
			t.Fatalf("DecodeCommand(%q).Fence.Token = %d, want 1..2^63-1", payload, c.Fence.Token)
		}
		if c.Fence.Seq > fence.MaxSeq {
			t.Fatalf("DecodeCommand(%q).Fence.Seq = %d, want 0..2^63-1", payload, c.Fence.Seq)
		}
		if c.State != fence.StateNone && c.State != fence.StateOn && c.State != fence.StateOff {
			t.Fatalf("DecodeCommand(%q).State = %d, want none, on or off", payload, c.State)
		}
		if len(c.Holder) > MaxText || !utf8.ValidString(c.Holder) {
			t.Fatalf("DecodeCommand(%q).Holder = %q, want valid UTF-8 of at most %d bytes", payload, c.Holder, MaxText)
		}
		if (c.Signer == "") != (c.Sig == nil) || (c.Sig != nil && len(c.Sig) != SigSize) {
			t.Fatalf("DecodeCommand(%q) signer %q sig %x: want both (a %d-byte sig) or neither", payload, c.Signer, c.Sig, SigSize)
		}
		checkAgainstJSON(t, payload, r)
		enc := EncodeRequest(r)
		if len(enc) > len(payload) {
			t.Fatalf("EncodeRequest(DecodeRequest(%q)) = %q, want at most %d bytes (the payload's length)", payload, enc, len(payload))
		}
		again, err := DecodeRequest("pump", enc)
		if err != nil {
			t.Fatalf("DecodeRequest(EncodeRequest(DecodeRequest(%q)) = %q) error = %v, want nil", payload, enc, err)
		}
		if !again.Equal(c) || again.Reply != r.Reply {
			t.Fatalf("DecodeRequest(EncodeRequest(DecodeRequest(%q)) = %q) = %+v, want %+v", payload, enc, again, r)
		}
		if enc2 := EncodeRequest(again); !bytes.Equal(enc2, enc) {
			t.Fatalf("EncodeRequest is not canonical: %q, then %q", enc, enc2)
		}
	})
}

// checkAgainstJSON is an oracle independent of DecodeCommand: an accepted
// payload is one JSON object whose keys appear once each, and
// encoding/json reads from it the same fields.
func checkAgainstJSON(t *testing.T, payload []byte, r Request) {
	t.Helper()
	c := r.Command
	keys, ok := objectKeys(payload)
	if !ok {
		t.Fatalf("DecodeCommand(%q) accepted what is not one JSON object", payload)
	}
	seen := map[string]bool{}
	for _, k := range keys {
		if seen[k] {
			t.Fatalf("DecodeCommand(%q) accepted key %q twice", payload, k)
		}
		seen[k] = true
	}
	var w struct {
		ID     *string      `json:"id"`
		Token  *json.Number `json:"token"`
		Seq    *json.Number `json:"seq"`
		State  *string      `json:"state"`
		Holder *string      `json:"holder"`
		Signer *string      `json:"signer"`
		Sig    *string      `json:"sig"`
		Pulse  *json.Number `json:"pulse_ms"`
		Reset  *bool        `json:"reset"`
		Reply  *string      `json:"reply"`
	}
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		t.Fatalf("DecodeCommand(%q) accepted it, encoding/json says: %v", payload, err)
	}
	str := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	num := func(p *json.Number) string {
		if p == nil {
			return "0"
		}
		return p.String()
	}
	state := str(w.State)
	if w.Pulse != nil && state == "" {
		state = "on" // a pulse is on, then back at rest
	}
	got := []string{c.ID, strconv.FormatUint(c.Fence.Token, 10), strconv.FormatUint(c.Fence.Seq, 10), c.State.String(), c.Holder, c.Signer,
		strconv.FormatInt(c.Pulse.Milliseconds(), 10), r.Reply}
	want := []string{str(w.ID), num(w.Token), num(w.Seq), state, str(w.Holder), str(w.Signer), num(w.Pulse), str(w.Reply)}
	if strings.Join(got, "\x00") != strings.Join(want, "\x00") {
		t.Fatalf("DecodeCommand(%q) read %q, encoding/json %q", payload, got, want)
	}
	if c.Reset != (w.Reset != nil && *w.Reset) {
		t.Fatalf("DecodeCommand(%q) read reset %v, encoding/json %v", payload, c.Reset, w.Reset)
	}
	if c.Sig != nil && EncodeSig(c.Sig) != str(w.Sig) {
		t.Fatalf("DecodeCommand(%q) read sig %x, encoding/json %q", payload, c.Sig, str(w.Sig))
	}
}

// objectKeys returns the keys of the JSON object payload, in order, as
// encoding/json's tokenizer reads them; ok is false if payload is not
// exactly one object.
func objectKeys(payload []byte) (keys []string, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(payload))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, false
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, false
		}
		keys = append(keys, tok.(string))
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, false
		}
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return nil, false
	}
	if _, err := dec.Token(); err == nil {
		return nil, false
	}
	return keys, true
}

// fuzzTopics are the gateways whose topics FuzzTopics parses: the default
// prefix, and a prefix of two levels.
var fuzzTopics = []Topics{{GatewayID: "greenhouse-1"}, {Prefix: "site/a", GatewayID: "gw"}}

// FuzzTopics checks Topics.Parse and Topics.Actuator on any topic: never
// a panic; a name only where the topic is exactly one of the actuator's
// topics, which the name rebuilds; and a name only if the gateway can
// publish that actuator's answer (no wildcard, no U+0000, valid UTF-8,
// and an answer topic within MQTT's limit). Its input is also taken as an
// actuator name, which each topic function must round-trip or refuse.
// (Names near the length limit are TestTopicsRefuseUnanswerableNames's:
// the fuzzer would spend its time minimizing 64 KB inputs.)
func FuzzTopics(f *testing.F) {
	for _, tp := range fuzzTopics {
		for _, n := range []string{"pump", "a-b_c", "$probe", "pümp", "+", "#", "a/b", "", "\x00", strings.Repeat("n", 300)} {
			f.Add(tp.Set(n))
			f.Add(tp.Result(n))
			f.Add(tp.State(n))
		}
		f.Add(tp.Status())
		f.Add(tp.Instance())
		f.Add(tp.SetFilter())
	}
	f.Add("pump")
	f.Fuzz(func(t *testing.T, s string) {
		for _, tp := range fuzzTopics {
			name, kind := tp.Parse(s)
			act, ok := tp.Actuator(s)
			if ok != (kind == KindSet) || (ok && act != name) || (!ok && act != "") {
				t.Fatalf("%+v: Actuator(%q) = %q, %v, but Parse = %q, %v", tp, s, act, ok, name, kind)
			}
			switch kind {
			case KindNone:
				if name != "" {
					t.Fatalf("%+v: Parse(%q) = %q, KindNone; want no name", tp, s, name)
				}
			case KindSet, KindResult, KindState:
				rebuilt := map[Kind]func(string) string{KindSet: tp.Set, KindResult: tp.Result, KindState: tp.State}[kind](name)
				if rebuilt != s {
					t.Fatalf("%+v: Parse(%q) = %q, %v, which names topic %q", tp, s, name, kind, rebuilt)
				}
				checkPublishable(t, tp, name)
			default:
				t.Fatalf("%+v: Parse(%q) kind = %v", tp, s, kind)
			}

			// s as a name: each of its topics parses back to it, or none does.
			var got []string
			for _, k := range []struct {
				topic string
				kind  Kind
			}{{tp.Set(s), KindSet}, {tp.Result(s), KindResult}, {tp.State(s), KindState}} {
				if n, kind := tp.Parse(k.topic); kind == k.kind && n == s {
					got = append(got, n)
				} else if kind != KindNone {
					t.Fatalf("%+v: Parse(%q) = %q, %v, want %q, %v or KindNone", tp, k.topic, n, kind, s, k.kind)
				}
			}
			if len(got) != 0 && len(got) != 3 {
				t.Fatalf("%+v: name %q parses back from %d of its 3 topics, want all or none", tp, s, len(got))
			}
			if len(got) == 3 {
				checkPublishable(t, tp, s)
			}
		}
	})
}

// checkPublishable fails t unless every topic of actuator name is one an
// MQTT client may publish on.
func checkPublishable(t *testing.T, tp Topics, name string) {
	t.Helper()
	for _, topic := range []string{tp.Set(name), tp.Result(name), tp.State(name)} {
		if len(topic) > MaxTopic || !utf8.ValidString(topic) || strings.ContainsAny(topic, "+#\x00") {
			t.Fatalf("%+v: name %q (%d bytes) accepted, but topic %.80q (%d bytes) cannot be published", tp, name, len(name), topic, len(topic))
		}
	}
}

// A command topic whose answer could not be published names no actuator:
// the gateway acknowledges it unanswered instead of breaking its own
// connection with the answer. Every other name parses, however odd: the
// gateway answers it (unknown actuator).
func TestTopicsRefuseUnanswerableNames(t *testing.T) {
	tp := Topics{GatewayID: "greenhouse-1"}
	tests := []struct {
		name string
		want bool
	}{
		{"pump", true},
		{"pümp-植物", true},
		{"$probe", true},
		{strings.Repeat("x", MaxName), true},
		{strings.Repeat("x", MaxName+1), false},
		{strings.Repeat("x", MaxTopic-len(tp.Result(""))), false},
		{ReplyLevel, false},
		{"pu\nmp", false},
		{"pump\uffff", false},
		{"a+b", false},
		{"+", false},
		{"#", false},
		{"pu#mp", false},
		{"pu\x00mp", false},
		{"p\xffump", false},
		{"", false},
	}
	for _, tt := range tests {
		got, ok := tp.Actuator(tp.Set(tt.name))
		if ok != tt.want || (ok && got != tt.name) {
			t.Errorf("Actuator(Set(%.40q, %d bytes)) = %.40q, %v, want ok %v", tt.name, len(tt.name), got, ok, tt.want)
		}
	}
}
