package wire

import (
	"strings"
	"testing"
	"time"

	"github.com/fencegate/fencegate/fence"
)

const maxTokenText = "9223372036854775807" // fence.MaxToken, 2^63-1

// testSig is a signature-sized byte string whose base64 has both + and /
// (so that the URL-safe alphabet differs); testSigText is its wire form.
var (
	testSig = func() []byte {
		b := make([]byte, SigSize)
		for i := range b {
			b[i] = byte(0xf8 + 3*i)
		}
		return b
	}()
	testSigText = EncodeSig(testSig)
)

// validCommands are payloads DecodeCommand must accept, with the command
// each decodes to for actuator "pump".
var validCommands = []struct {
	name    string
	payload string
	want    fence.Command
}{
	{"full on", `{"id":"c-1","token":42,"seq":3,"state":"on","holder":"ctl-a"}`,
		fence.Command{ID: "c-1", Holder: "ctl-a", Actuator: "pump", Fence: fence.Fence{Token: 42, Seq: 3}, State: fence.StateOn}},
	{"full off", `{"id":"c-2","token":42,"seq":4,"state":"off","holder":"ctl-a"}`,
		fence.Command{ID: "c-2", Holder: "ctl-a", Actuator: "pump", Fence: fence.Fence{Token: 42, Seq: 4}, State: fence.StateOff}},
	{"other field order", `{"holder":"h","state":"on","seq":1,"token":2,"id":"x"}`,
		fence.Command{ID: "x", Holder: "h", Actuator: "pump", Fence: fence.Fence{Token: 2, Seq: 1}, State: fence.StateOn}},
	{"with a reply topic", `{"id":"r-1","token":7,"state":"off","reply":"fencegate/gw/reply/ctl-a"}`,
		fence.Command{ID: "r-1", Actuator: "pump", Fence: fence.Fence{Token: 7}, State: fence.StateOff}},
	{"fence only", `{"id":"f-1","token":7,"seq":2}`,
		fence.Command{ID: "f-1", Actuator: "pump", Fence: fence.Fence{Token: 7, Seq: 2}}},
	{"token only", `{"token":1}`,
		fence.Command{Actuator: "pump", Fence: fence.Fence{Token: 1}}},
	{"seq omitted", `{"token":5,"state":"on"}`,
		fence.Command{Actuator: "pump", Fence: fence.Fence{Token: 5}, State: fence.StateOn}},
	{"seq zero", `{"token":5,"seq":0,"state":"off"}`,
		fence.Command{Actuator: "pump", Fence: fence.Fence{Token: 5}, State: fence.StateOff}},
	{"max token", `{"token":` + maxTokenText + `,"state":"on"}`,
		fence.Command{Actuator: "pump", Fence: fence.Fence{Token: fence.MaxToken}, State: fence.StateOn}},
	{"max seq", `{"token":1,"seq":` + maxTokenText + `}`,
		fence.Command{Actuator: "pump", Fence: fence.Fence{Token: 1, Seq: fence.MaxSeq}}},
	{"whitespace around", " \n\t{ \"token\" : 9 ,\n \"state\" : \"off\" }\r\n\t ",
		fence.Command{Actuator: "pump", Fence: fence.Fence{Token: 9}, State: fence.StateOff}},
	{"empty id and holder", `{"id":"","holder":"","token":3}`,
		fence.Command{Actuator: "pump", Fence: fence.Fence{Token: 3}}},
	{"id of 128 bytes", `{"id":"` + strings.Repeat("i", MaxText) + `","token":3}`,
		fence.Command{ID: strings.Repeat("i", MaxText), Actuator: "pump", Fence: fence.Fence{Token: 3}}},
	{"holder of 128 bytes", `{"holder":"` + strings.Repeat("é", MaxText/2) + `","token":3}`,
		fence.Command{Holder: strings.Repeat("é", MaxText/2), Actuator: "pump", Fence: fence.Fence{Token: 3}}},
	{"escapes in strings", `{"id":"a\"b\\c\/d\u00e9\n","holder":"\u2028<&>","token":3}`,
		fence.Command{ID: "a\"b\\c/dé\n", Holder: "\u2028<&>", Actuator: "pump", Fence: fence.Fence{Token: 3}}},
	{"unicode", `{"id":"ключ-1","holder":"植物","token":3,"state":"on"}`,
		fence.Command{ID: "ключ-1", Holder: "植物", Actuator: "pump", Fence: fence.Fence{Token: 3}, State: fence.StateOn}},
	{"signed", `{"id":"s-1","token":42,"state":"on","holder":"ctl-a","signer":"ctl-a","sig":"` + testSigText + `"}`,
		fence.Command{ID: "s-1", Holder: "ctl-a", Actuator: "pump", Fence: fence.Fence{Token: 42}, State: fence.StateOn, Signer: "ctl-a", Sig: testSig}},
	{"signed, sig first", `{"sig":"` + testSigText + `","signer":"ctl-b","token":7}`,
		fence.Command{Actuator: "pump", Fence: fence.Fence{Token: 7}, Signer: "ctl-b", Sig: testSig}},
	{"pulse", `{"id":"p-1","token":42,"seq":3,"pulse_ms":500}`,
		fence.Command{ID: "p-1", Actuator: "pump", Fence: fence.Fence{Token: 42, Seq: 3}, State: fence.StateOn, Pulse: 500 * time.Millisecond}},
	{"pulse with state on", `{"token":42,"state":"on","pulse_ms":1}`,
		fence.Command{Actuator: "pump", Fence: fence.Fence{Token: 42}, State: fence.StateOn, Pulse: time.Millisecond}},
	{"reset", `{"id":"r-1","token":42,"seq":9,"reset":true}`,
		fence.Command{ID: "r-1", Actuator: "pump", Fence: fence.Fence{Token: 42, Seq: 9}, Reset: true}},
	{"longest pulse", `{"pulse_ms":600000,"token":42}`,
		fence.Command{Actuator: "pump", Fence: fence.Fence{Token: 42}, State: fence.StateOn, Pulse: fence.MaxPulse}},
	{"payload of exactly MaxPayload bytes", `{"token":3}` + strings.Repeat(" ", MaxPayload-len(`{"token":3}`)),
		fence.Command{Actuator: "pump", Fence: fence.Fence{Token: 3}}},
	// Strings that encoding/json escapes more verbosely than a controller
	// may have written them: re-encoding must stay within MaxPayload.
	{"html characters at the limit", `{"id":"` + strings.Repeat("<", MaxText) + `","holder":"` + strings.Repeat("&", MaxText) + `","token":1}`,
		fence.Command{ID: strings.Repeat("<", MaxText), Holder: strings.Repeat("&", MaxText), Actuator: "pump", Fence: fence.Fence{Token: 1}}},
	{"line separators near the limit", `{"id":"` + strings.Repeat(`\u0001`, MaxText) + `","token":1,"holder":"` + strings.Repeat("\u2028", 42) + `\u0001\u0001"}`,
		fence.Command{ID: strings.Repeat("\x01", MaxText), Holder: strings.Repeat("\u2028", 42) + "\x01\x01", Actuator: "pump", Fence: fence.Fence{Token: 1}}},
}

// badCommands are payloads DecodeCommand must refuse. wantErr is a fragment
// of the message; wantID is the id the refused command must still carry.
var badCommands = []struct {
	name    string
	payload string
	wantErr string
	wantID  string
}{
	{"bad JSON", `{"token":`, "not JSON", ""},
	{"unterminated object", `{"token":1`, "not JSON", ""},
	{"trailing comma", `{"token":1,}`, "not JSON", ""},
	{"not JSON at all", `token=1`, "not JSON", ""},
	{"unquoted key", `{token:1}`, "not JSON", ""},
	{"JSON array", `[{"token":1}]`, "JSON object", ""},
	{"JSON string", `"token"`, "JSON object", ""},
	{"JSON number", `42`, "JSON object", ""},
	{"JSON null", `null`, "JSON object", ""},
	{"JSON true", `true`, "JSON object", ""},
	{"missing token", `{"id":"m-1","state":"on"}`, "token is required", "m-1"},
	{"empty object", `{}`, "token is required", ""},
	{"token 0", `{"token":0}`, "token must be an integer from 1 to 2^63-1, got 0", ""},
	{"negative token", `{"token":-1}`, "got negative -1", ""},
	{"negative zero token", `{"token":-0}`, "negative", ""},
	{"float token", `{"token":4.2}`, "token must be an integer from 1 to 2^63-1, got 4.2", ""},
	{"integral float token", `{"token":4.0}`, "got 4.0", ""},
	{"leading zero token", `{"token":01}`, "token must be an integer from 1 to 2^63-1, got 01 (a JSON number has no leading zero)", ""},
	{"leading zero token, quoted as sent", `{"token":0102}`, "token must be an integer from 1 to 2^63-1, got 0102 (a JSON number has no leading zero)", ""},
	{"leading zeros seq", `{"token":1,"seq":007}`, "seq must be an integer from 0 to 2^63-1, got 007 (a JSON number has no leading zero)", ""},
	{"negative leading zero token", `{"token":-01}`, "got negative -01", ""},
	{"leading zero float token", `{"token":01.5}`, "got 01.5", ""},
	{"leading zero id", `{"id":012,"token":1}`, "id must be a string, got 012", ""},
	{"hexadecimal token", `{"token":0xff}`, "token must be an integer from 1 to 2^63-1, got 0xff (JSON numbers are decimal; 0xff is 255)", ""},
	{"hexadecimal seq", `{"token":1,"seq":0X10}`, "seq must be an integer from 0 to 2^63-1, got 0X10 (JSON numbers are decimal; 0X10 is 16)", ""},
	{"hexadecimal token, too large", `{"token":0x10000000000000000}`, "got 0x10000000000000000 (not a JSON number; JSON numbers are decimal)", ""},
	{"binary token", `{"token":0b101}`, "got 0b101 (JSON numbers are decimal; 0b101 is 5)", ""},
	{"token of letters", `{"token":0xyz}`, "got 0xyz (not a JSON number; JSON numbers are decimal)", ""},
	{"negative hexadecimal token", `{"token":-0x1}`, "got negative -0x1", ""},
	{"hexadecimal id", `{"id":0x1,"token":1}`, "id must be a string, got 0x1", ""},
	{"two values for a key", `{"token":1 2}`, "not JSON", ""},
	{"exponent token", `{"token":1e3}`, "got 1e3", ""},
	{"upper exponent token", `{"token":1E3}`, "got 1E3", ""},
	{"string token", `{"token":"42"}`, `token must be an integer from 1 to 2^63-1, got "42"`, ""},
	{"bool token", `{"token":true}`, "got true", ""},
	{"null token", `{"token":null}`, "got null", ""},
	{"object token", `{"token":{"v":1}}`, "token must be an integer", ""},
	{"token 2^63", `{"token":9223372036854775808}`, "too large", ""},
	{"token 2^64", `{"token":18446744073709551616}`, "too large", ""},
	{"huge token", `{"token":` + strings.Repeat("9", 60) + `}`, "too large", ""},
	{"negative seq", `{"token":1,"seq":-1}`, "seq must be an integer from 0 to 2^63-1, got negative -1", ""},
	{"float seq", `{"token":1,"seq":1.5}`, "seq must be an integer", ""},
	{"seq 2^63", `{"token":1,"seq":9223372036854775808}`, "too large", ""},
	{"string seq", `{"token":1,"seq":"1"}`, "seq must be an integer", ""},
	{"state ON", `{"token":1,"state":"ON"}`, `state "ON" is not "on" or "off"`, ""},
	{"state toggle", `{"token":1,"state":"toggle"}`, `state "toggle"`, ""},
	{"state empty", `{"token":1,"state":""}`, `state ""`, ""},
	{"state 1", `{"token":1,"state":1}`, "state must be a string, got 1", ""},
	{"state true", `{"token":1,"state":true}`, "state must be a string", ""},
	{"state null", `{"token":1,"state":null}`, "state must be a string, got null", ""},
	{"unknown field", `{"token":1,"colour":"red"}`, `unknown field "colour"`, ""},
	{"reply as number", `{"id":"y-1","token":1,"reply":7}`, "reply must be a string, got 7", "y-1"},
	{"reply as null", `{"token":1,"reply":null}`, "reply must be a string, got null", ""},
	{"reply twice", `{"token":1,"reply":"a","reply":"b"}`, `field "reply" appears twice`, ""},
	{"reset false", `{"token":1,"reset":false}`, "reset must be true (or left out), got false", ""},
	{"reset with a state", `{"id":"r-2","token":1,"state":"on","reset":true}`, "reset goes with a fence-only command", "r-2"},
	{"reset with a pulse", `{"token":1,"pulse_ms":5,"reset":true}`, "reset goes with a fence-only command", ""},
	{"pulse 0", `{"token":1,"pulse_ms":0}`, "pulse_ms must be an integer from 1 to", ""},
	{"pulse too long", `{"token":1,"pulse_ms":600001}`, "pulse_ms must be an integer from 1 to 600000, got 600001 (too large): a pulse lasts at most 10m0s", ""},
	{"pulse as string", `{"token":1,"pulse_ms":"500"}`, "pulse_ms must be an integer", ""},
	{"pulse with state off", `{"id":"p-2","token":1,"state":"off","pulse_ms":500}`, `pulse_ms with state "off"`, "p-2"},
	{"pulse twice", `{"token":1,"pulse_ms":5,"pulse_ms":6}`, `field "pulse_ms" appears twice`, ""},
	{"field in wrong case", `{"Token":1}`, `unknown field "Token"`, ""},
	{"duplicate token", `{"token":1,"token":2}`, `field "token" appears twice`, ""},
	{"duplicate token escaped", `{"token":1,"\u0074oken":2}`, `field "token" appears twice`, ""},
	{"duplicate id", `{"id":"d-1","token":1,"id":"d-2"}`, `field "id" appears twice`, "d-1"},
	{"id of 129 bytes", `{"id":"` + strings.Repeat("i", MaxText+1) + `","token":1}`, "id is 129 bytes; the limit is 128", ""},
	{"holder of 129 bytes", `{"id":"h-1","holder":"` + strings.Repeat("h", MaxText+1) + `","token":1}`, "holder is 129 bytes; the limit is 128", "h-1"},
	{"id as number", `{"id":12,"token":1}`, "id must be a string, got 12", ""},
	{"id as null", `{"id":null,"token":1}`, "id must be a string, got null", ""},
	{"holder as object", `{"holder":{"a":1},"token":1}`, "holder must be a string", ""},
	{"oversize payload", `{"token":1,"holder":"` + strings.Repeat("h", MaxPayload) + `"}`, "the limit is 1024", ""},
	{"oversize payload with id", `{"id":"big-1","token":1,"holder":"` + strings.Repeat("h", MaxPayload) + `"}`, "payload is 1060 bytes; the limit is 1024", "big-1"},
	{"oversize payload with long id", `{"id":"` + strings.Repeat("i", MaxPayload) + `","token":1}`, "the limit is 1024", ""},
	{"oversize invalid JSON with id", `{"id":"big-2","token":` + strings.Repeat("1", MaxPayload), "the limit is 1024", "big-2"},
	{"oversize with the id past the limit", `{"holder":"` + strings.Repeat("h", MaxPayload) + `","id":"late","token":1}`, "the limit is 1024", ""},
	{"oversize with a nested value before the id", `{"x":[{"a":[1,{"b":2}]}],"id":"n-1","token":1,"holder":"` + strings.Repeat("h", MaxPayload) + `"}`, "the limit is 1024", "n-1"},
	{"oversize by whitespace", `{"token":1}` + strings.Repeat(" ", MaxPayload), "the limit is 1024", ""},
	{"empty payload", ``, "empty payload", ""},
	{"whitespace-only payload", " \n\t\r ", "empty payload", ""},
	{"trailing garbage", `{"token":1} x`, "data after the JSON object", ""},
	{"trailing object", `{"token":1}{}`, "data after the JSON object", ""},
	{"trailing object with id", `{"id":"t-1","token":1}{"token":2}`, "data after the JSON object", "t-1"},
	{"trailing number", `{"token":1} 2`, "data after the JSON object", ""},
	{"trailing brace", `{"token":1}}`, "data after the JSON object", ""},
	{"trailing NUL", "{\"token\":1}\x00", "data after the JSON object", ""},
	{"invalid UTF-8 in string", "{\"id\":\"\xff\",\"token\":1}", "not valid UTF-8", ""},
	{"invalid UTF-8 outside string", "{\"token\":1}\xc3", "not valid UTF-8", ""},
	{"id kept when token negative", `{"id":"a-1","token":-1}`, "negative", "a-1"},
	{"id kept when it comes last", `{"token":-1,"state":"on","id":"a-2"}`, "negative", "a-2"},
	{"id kept when state bad", `{"id":"a-3","token":1,"state":"toggle"}`, `state "toggle"`, "a-3"},
	{"sig without signer", `{"id":"g-1","token":1,"sig":"` + testSigText + `"}`, "signer and sig go together", "g-1"},
	{"signer without sig", `{"id":"g-2","token":1,"signer":"ctl-a"}`, "signer and sig go together", "g-2"},
	{"empty signer", `{"id":"g-3","token":1,"signer":"","sig":"` + testSigText + `"}`, "signer is empty", "g-3"},
	{"signer of 129 bytes", `{"token":1,"signer":"` + strings.Repeat("s", MaxText+1) + `","sig":"` + testSigText + `"}`, "signer is 129 bytes; the limit is 128", ""},
	{"signer as number", `{"token":1,"signer":7,"sig":"` + testSigText + `"}`, "signer must be a string, got 7", ""},
	{"sig as number", `{"token":1,"signer":"a","sig":7}`, "sig must be a string, got 7", ""},
	{"sig as null", `{"token":1,"signer":"a","sig":null}`, "sig must be a string, got null", ""},
	{"sig empty", `{"token":1,"signer":"a","sig":""}`, "sig holds 0 bytes; an Ed25519 signature has 64", ""},
	{"sig of 63 bytes", `{"token":1,"signer":"a","sig":"` + EncodeSig(testSig[:63]) + `"}`, "sig holds 63 bytes", ""},
	{"sig of 65 bytes", `{"token":1,"signer":"a","sig":"` + EncodeSig(append(testSig[:64:64], 1)) + `"}`, "sig holds 65 bytes", ""},
	{"sig not base64", `{"token":1,"signer":"a","sig":"not base64!"}`, "sig must be standard base64 with padding", ""},
	{"sig without padding", `{"token":1,"signer":"a","sig":"` + strings.TrimRight(testSigText, "=") + `"}`, "sig must be standard base64", ""},
	{"sig URL-safe", `{"token":1,"signer":"a","sig":"` + strings.NewReplacer("+", "-", "/", "_").Replace(testSigText) + `"}`, "sig must be standard base64", ""},
	{"sig with a line break", `{"token":1,"signer":"a","sig":"` + testSigText[:44] + `\n` + testSigText[44:] + `"}`, "sig must be standard base64", ""},
	{"sig with padding bits set", `{"token":1,"signer":"a","sig":"` + testSigText[:85] + "B==" + `"}`, "sig must be standard base64", ""},
	{"duplicate sig", `{"token":1,"signer":"a","sig":"` + testSigText + `","sig":"` + testSigText + `"}`, `field "sig" appears twice`, ""},
	{"id kept when field unknown", `{"colour":1,"id":"a-4","token":1}`, "unknown field", "a-4"},
}

func TestDecodeCommand(t *testing.T) {
	for _, tt := range validCommands {
		got, err := DecodeCommand("pump", []byte(tt.payload))
		if err != nil {
			t.Errorf("%s: DecodeCommand(%q) error = %v, want nil", tt.name, tt.payload, err)
			continue
		}
		if !got.Equal(tt.want) {
			t.Errorf("%s: DecodeCommand(%q) = %+v, want %+v", tt.name, tt.payload, got, tt.want)
		}
	}
}

func TestDecodeCommandRejects(t *testing.T) {
	for _, tt := range badCommands {
		got, err := DecodeCommand("pump", []byte(tt.payload))
		if err == nil {
			t.Errorf("%s: DecodeCommand(%q) = %+v, nil, want an error containing %q", tt.name, tt.payload, got, tt.wantErr)
			continue
		}
		if !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("%s: DecodeCommand(%q) error = %q, want it to contain %q", tt.name, tt.payload, err, tt.wantErr)
		}
		if got.ID != tt.wantID {
			t.Errorf("%s: DecodeCommand(%q).ID = %q, want %q", tt.name, tt.payload, got.ID, tt.wantID)
		}
		if got.Actuator != "pump" {
			t.Errorf("%s: DecodeCommand(%q).Actuator = %q, want %q", tt.name, tt.payload, got.Actuator, "pump")
		}
	}
}

func TestEncodeCommandRoundTrip(t *testing.T) {
	cmds := []fence.Command{
		{Actuator: "pump", Fence: fence.Fence{Token: 1}},
		{ID: "c-1", Holder: "ctl-a", Actuator: "pump", Fence: fence.Fence{Token: 42, Seq: 3}, State: fence.StateOn},
		{ID: "c-2", Actuator: "pump", Fence: fence.Fence{Token: fence.MaxToken, Seq: fence.MaxSeq}, State: fence.StateOff},
		{ID: `q"uote\back` + "\n\t\x00\x1f\u2028\u2029<>&é", Holder: "植物", Actuator: "pump", Fence: fence.Fence{Token: 9}},
		{ID: strings.Repeat("<", MaxText), Holder: strings.Repeat("\u2028", MaxText/3), Actuator: "pump",
			Fence: fence.Fence{Token: fence.MaxToken, Seq: fence.MaxSeq}, State: fence.StateOff},
		{ID: "s-1", Holder: "ctl-a", Actuator: "pump", Fence: fence.Fence{Token: 42, Seq: 1}, State: fence.StateOn, Signer: "ctl-a", Sig: testSig},
		{Actuator: "pump", Fence: fence.Fence{Token: 3}, Signer: "ctl \"b\"", Sig: testSig},
	}
	for _, c := range cmds {
		b := EncodeCommand(c)
		got, err := DecodeCommand(c.Actuator, b)
		if err != nil {
			t.Errorf("DecodeCommand(EncodeCommand(%+v) = %q) error = %v, want nil", c, b, err)
			continue
		}
		if !got.Equal(c) {
			t.Errorf("DecodeCommand(EncodeCommand(%+v) = %q) = %+v, want %+v", c, b, got, c)
		}
	}
	// Invalid UTF-8 in a controller's strings is replaced, as encoding/json does.
	c := fence.Command{ID: "a\xffb", Actuator: "pump", Fence: fence.Fence{Token: 1}}
	got, err := DecodeCommand("pump", EncodeCommand(c))
	if want := "a\uFFFDb"; err != nil || got.ID != want {
		t.Errorf("DecodeCommand(EncodeCommand(id %q)) = %q, %v, want %q, nil", c.ID, got.ID, err, want)
	}
}

// A signed command fits MaxPayload with every field at its longest, each
// string written with two-byte escapes (\" and \\): the limit leaves room
// for the signature. (Only control characters escape longer, to six bytes;
// an id and holder of those do not fit even unsigned.)
func TestSignedCommandFits(t *testing.T) {
	long := strings.Repeat(`"`, MaxText)
	c := fence.Command{ID: long, Holder: long, Signer: long, Actuator: "pump",
		Fence: fence.Fence{Token: fence.MaxToken, Seq: fence.MaxSeq}, State: fence.StateOff, Sig: testSig}
	b := EncodeCommand(c)
	if len(b) > MaxPayload {
		t.Fatalf("the longest signed command is %d bytes, above MaxPayload %d", len(b), MaxPayload)
	}
	got, err := DecodeCommand("pump", b)
	if err != nil || !got.Equal(c) {
		t.Errorf("DecodeCommand(%q) = %+v, %v, want %+v", b, got, err, c)
	}
	t.Logf("longest signed command with two-byte escapes: %d of %d bytes", len(b), MaxPayload)
}

func TestEncodeCommandWire(t *testing.T) {
	tests := []struct {
		c    fence.Command
		want string
	}{
		{fence.Command{Actuator: "pump", Fence: fence.Fence{Token: 1}}, `{"token":1}`},
		{fence.Command{ID: "c-1", Holder: "h", Actuator: "pump", Fence: fence.Fence{Token: 42, Seq: 3}, State: fence.StateOn},
			`{"id":"c-1","token":42,"seq":3,"state":"on","holder":"h"}`},
		{fence.Command{Actuator: "pump", Fence: fence.Fence{Token: 2}, State: fence.StateOff}, `{"token":2,"state":"off"}`},
		{fence.Command{ID: "a\"\\\n\x01<", Actuator: "pump", Fence: fence.Fence{Token: 2}}, `{"id":"a\"\\\n\u0001<","token":2}`},
	}
	for _, tt := range tests {
		if got := string(EncodeCommand(tt.c)); got != tt.want {
			t.Errorf("EncodeCommand(%+v) = %s, want %s", tt.c, got, tt.want)
		}
	}
}

func TestTopics(t *testing.T) {
	tp := Topics{Prefix: "fencegate", GatewayID: "greenhouse-1"}
	strs := []struct {
		name, got, want string
	}{
		{"Set", tp.Set("pump"), "fencegate/greenhouse-1/pump/set"},
		{"Result", tp.Result("pump"), "fencegate/greenhouse-1/pump/result"},
		{"State", tp.State("pump"), "fencegate/greenhouse-1/pump/state"},
		{"Status", tp.Status(), "fencegate/greenhouse-1/status"},
		{"Instance", tp.Instance(), "fencegate/greenhouse-1/instance"},
		{"SetFilter", tp.SetFilter(), "fencegate/greenhouse-1/+/set"},
		{"ResultFilter", tp.ResultFilter(), "fencegate/greenhouse-1/+/result"},
		{"StateFilter", tp.StateFilter(), "fencegate/greenhouse-1/+/state"},
		{"default prefix", Topics{GatewayID: "gw"}.Status(), DefaultPrefix + "/gw/status"},
		{"nested prefix Set", Topics{Prefix: "site/a", GatewayID: "gw"}.Set("fan"), "site/a/gw/fan/set"},
	}
	for _, s := range strs {
		if s.got != s.want {
			t.Errorf("Topics.%s = %q, want %q", s.name, s.got, s.want)
		}
	}

	tests := []struct {
		topic    string
		wantName string
		wantOK   bool
	}{
		{"fencegate/greenhouse-1/pump/set", "pump", true},
		{"fencegate/greenhouse-1/fan_2/set", "fan_2", true},
		{tp.Set("valve"), "valve", true},
		{"other/greenhouse-1/pump/set", "", false},
		{"fencegatex/greenhouse-1/pump/set", "", false},
		{"fencegate/greenhouse-2/pump/set", "", false},
		{"fencegate/greenhouse-10/pump/set", "", false},
		{"fencegate/greenhouse/pump/set", "", false},
		{"fencegate/greenhouse-1/a/b/set", "", false},
		{"fencegate/greenhouse-1/pump/set/set", "", false},
		{"fencegate/greenhouse-1//set", "", false},
		{"fencegate/greenhouse-1/set", "", false},
		{"fencegate/greenhouse-1/pump", "", false},
		{"fencegate/greenhouse-1/pump/", "", false},
		{"fencegate/greenhouse-1/pump/result", "", false},
		{"fencegate/greenhouse-1/pump/state", "", false},
		{"fencegate/greenhouse-1/pump/set/", "", false},
		{"fencegate/greenhouse-1/pump/setx", "", false},
		{"fencegate/greenhouse-1/status", "", false},
		{"/fencegate/greenhouse-1/pump/set", "", false},
		{"", "", false},
	}
	for _, tt := range tests {
		name, ok := tp.Actuator(tt.topic)
		if name != tt.wantName || ok != tt.wantOK {
			t.Errorf("Actuator(%q) = %q, %v, want %q, %v", tt.topic, name, ok, tt.wantName, tt.wantOK)
		}
	}
	// Every name each topic function produces is read back with its kind.
	for _, n := range []string{"pump", "a-b_c", "X9"} {
		if got, ok := tp.Actuator(tp.Set(n)); got != n || !ok {
			t.Errorf("Actuator(Set(%q)) = %q, %v, want %q, true", n, got, ok, n)
		}
		for _, k := range []struct {
			topic string
			kind  Kind
		}{{tp.Set(n), KindSet}, {tp.Result(n), KindResult}, {tp.State(n), KindState}} {
			if got, kind := tp.Parse(k.topic); got != n || kind != k.kind {
				t.Errorf("Parse(%q) = %q, %v, want %q, %v", k.topic, got, kind, n, k.kind)
			}
		}
	}
	for _, topic := range []string{tp.Status(), tp.Instance(), "fencegate/greenhouse-1/pump/other", "x/greenhouse-1/pump/state"} {
		if got, kind := tp.Parse(topic); kind != KindNone || got != "" {
			t.Errorf("Parse(%q) = %q, %v, want KindNone", topic, got, kind)
		}
	}
}

func TestResultRoundTrip(t *testing.T) {
	results := []fence.Result{
		{},
		{ID: "c-1", Actuator: "pump", Outcome: fence.Applied, Command: fence.Fence{Token: 42, Seq: 3},
			Fence: fence.Fence{Token: 42, Seq: 3}, State: fence.StateOn},
		{ID: "c-2", Actuator: "pump", Outcome: fence.Stale, Command: fence.Fence{Token: 1},
			Fence: fence.Fence{Token: 42, Seq: 3}, State: fence.StateOff, Error: "token 1 seq 0 is below the fence 42/3; reread state"},
		{ID: "c-3", Actuator: "pump", Outcome: fence.Duplicate, Command: fence.Fence{Token: fence.MaxToken, Seq: fence.MaxSeq},
			Fence: fence.Fence{Token: fence.MaxToken, Seq: fence.MaxSeq}, State: fence.StateOff},
		{Actuator: "nope", Outcome: fence.Rejected, Error: `unknown field "colour" <&> ключ`},
		{ID: "c-4", Actuator: "fan", Outcome: fence.Failed, Command: fence.Fence{Token: 7, Seq: 1},
			Fence: fence.Fence{Token: 7, Seq: 1}, Error: "drive GPIO18: injected fault"},
		{ID: "c-5", Actuator: "fan", Outcome: fence.Applied, Command: fence.Fence{Token: 8}, Fence: fence.Fence{Token: 8}},
		{ID: "c-6", Actuator: "fan", Outcome: fence.Duplicate, Command: fence.Fence{Token: 9}, Fence: fence.Fence{Token: 9},
			State: fence.StateOn, Actual: "off"},
		{ID: "c-7", Actuator: "fan", Outcome: fence.Stale, Command: fence.Fence{Token: 1}, Fence: fence.Fence{Token: 9},
			State: fence.StateOn, Actual: "unknown", Error: "below"},
	}
	for _, r := range results {
		b := EncodeResult(r)
		got, err := DecodeResult(b)
		if err != nil {
			t.Errorf("DecodeResult(EncodeResult(%+v) = %s) error = %v, want nil", r, b, err)
			continue
		}
		if got != r {
			t.Errorf("DecodeResult(EncodeResult(%+v) = %s) = %+v, want %+v", r, b, got, r)
		}
	}
	for _, bad := range []string{``, `{`, `[]`, `{"state":"maybe"}`, `{"token":-1}`, `{"fence":{"token":"x"}}`} {
		if got, err := DecodeResult([]byte(bad)); err == nil {
			t.Errorf("DecodeResult(%q) = %+v, nil, want an error", bad, got)
		}
	}
}

func TestStateRoundTrip(t *testing.T) {
	at := time.Date(2025, 3, 14, 15, 9, 26, 535897932, time.UTC)
	outputs := []fence.Output{
		{Actuator: "pump"},
		{Actuator: "pump", State: fence.StateOn, Fence: fence.Fence{Token: 42, Seq: 3}, Holder: "ctl-a", ChangedAt: at},
		{Actuator: "fan", State: fence.StateOff, Fence: fence.Fence{Token: fence.MaxToken, Seq: fence.MaxSeq}, ChangedAt: at.In(time.FixedZone("CET", 3600))},
		{Actuator: "heater", Fence: fence.Fence{Token: 5}},
	}
	for _, o := range outputs {
		b := EncodeState(o)
		got, err := DecodeState(b)
		if err != nil {
			t.Errorf("DecodeState(EncodeState(%+v) = %s) error = %v, want nil", o, b, err)
			continue
		}
		// The state message does not carry the scope, and times compare by instant.
		if got.Actuator != o.Actuator || got.State != o.State || got.Fence != o.Fence ||
			got.Holder != o.Holder || !got.ChangedAt.Equal(o.ChangedAt) || got.Scope != "" {
			t.Errorf("DecodeState(EncodeState(%+v) = %s) = %+v, want %+v", o, b, got, o)
		}
	}
	// A never-set output has no changed_at time, not the zero time.
	if b := string(EncodeState(fence.Output{Actuator: "pump"})); !strings.Contains(b, `"changed_at":null`) {
		t.Errorf("EncodeState(never set) = %s, want changed_at null", b)
	}
	for _, bad := range []string{``, `{`, `{"state":"maybe"}`, `{"changed_at":"yesterday"}`} {
		if got, err := DecodeState([]byte(bad)); err == nil {
			t.Errorf("DecodeState(%q) = %+v, nil, want an error", bad, got)
		}
	}
}

// The fields a controller reacts to survive the wire: the reason of a
// rejection, the member that blocked it, and each state's scope.
func TestResultReasonAndBlocking(t *testing.T) {
	at := time.Date(2026, 12, 3, 7, 0, 0, 0, time.UTC)
	r := fence.Result{ID: "b-1", Actuator: "vent-open", Outcome: fence.Rejected, Reason: fence.ReasonInterlock,
		Command: fence.Fence{Token: 42}, Fence: fence.Fence{Token: 42}, State: fence.StateOff, Error: "interlock vent: vent-close is on",
		Blocking: &fence.Output{Actuator: "vent-close", Scope: "vent", State: fence.StateOn, Fence: fence.Fence{Token: 42}, Holder: "a", ChangedAt: at}}
	got, err := DecodeResult(EncodeResult(r))
	if err != nil {
		t.Fatal(err)
	}
	if got.Reason != r.Reason || got.Blocking == nil || *got.Blocking != *r.Blocking || got.State != r.State {
		t.Errorf("DecodeResult(EncodeResult(%+v)) = %+v (blocking %+v)", r, got, got.Blocking)
	}
	plain, _ := DecodeResult(EncodeResult(fence.Result{ID: "x", Outcome: fence.Applied}))
	if plain.Reason != "" || plain.Blocking != nil || strings.Contains(string(EncodeResult(fence.Result{ID: "x", Outcome: fence.Applied})), "blocking") {
		t.Errorf("an applied answer carries reason or blocking: %+v", plain)
	}
	o := fence.Output{Actuator: "heater", Scope: "climate", State: fence.StateOn, Fence: fence.Fence{Token: 9}, Holder: "a", ChangedAt: at}
	if back, err := DecodeState(EncodeState(o)); err != nil || back != o {
		t.Errorf("DecodeState(EncodeState(%+v)) = %+v, %v", o, back, err)
	}
}

func TestClaimRoundTrip(t *testing.T) {
	c := Claim{Instance: "9f2c", Store: "a3f0", Host: "pi", PID: 812, Started: time.Date(2026, 12, 3, 7, 0, 0, 0, time.UTC), Version: "v1", Connection: 3, Conflict: "77aa"}
	got, err := DecodeClaim(EncodeClaim(c))
	if err != nil || got != c {
		t.Errorf("DecodeClaim(EncodeClaim(%+v)) = %+v, %v", c, got, err)
	}
	for _, bad := range []string{"", "{}", "not json", `{"store":"x"}`} {
		if _, err := DecodeClaim([]byte(bad)); err == nil {
			t.Errorf("DecodeClaim(%q) succeeded", bad)
		}
	}
}

// A command's reply topic is read as sent (escapes undone), on the fast
// path and the streaming one, and EncodeRequest writes it back.
func TestDecodeRequestReply(t *testing.T) {
	for _, tt := range []struct{ payload, reply string }{
		{`{"id":"r-1","token":42,"state":"on","reply":"fencegate/gw/reply/ctl-a"}`, "fencegate/gw/reply/ctl-a"},
		{`{"reply":"fencegate/gw/reply/ctl-\u0061/x","token":42}`, "fencegate/gw/reply/ctl-a/x"},
		{`{"token":42}`, ""},
	} {
		r, err := DecodeRequest("pump", []byte(tt.payload))
		if err != nil || r.Reply != tt.reply || r.Fence.Token != 42 {
			t.Errorf("DecodeRequest(%s) = %+v, %v; want reply %q", tt.payload, r, err, tt.reply)
		}
		again, err := DecodeRequest("pump", EncodeRequest(r))
		if err != nil || again.Reply != r.Reply || !again.Equal(r.Command) {
			t.Errorf("DecodeRequest(EncodeRequest(%+v)) = %+v, %v", r, again, err)
		}
		if c, err := DecodeCommand("pump", []byte(tt.payload)); err != nil || !c.Equal(r.Command) {
			t.Errorf("DecodeCommand(%s) = %+v, %v; want the request's command %+v", tt.payload, c, err, r.Command)
		}
	}
	plain := EncodeRequest(Request{Command: fence.Command{ID: "r-2", Fence: fence.Fence{Token: 3}, State: fence.StateOff}, Reply: "fencegate/gw/reply/ctl-a"})
	if r, ok := decodeFast("pump", plain); !ok || r.Reply != "fencegate/gw/reply/ctl-a" {
		t.Errorf("decodeFast(%s) = %+v, %v: want the fast path to read the reply", plain, r, ok)
	}
}

// CheckReply takes a topic under the gateway's reply level, and refuses
// anything else with a reason that names what to do.
func TestCheckReply(t *testing.T) {
	tp := Topics{Prefix: "site/fg", GatewayID: "gw"}
	for _, ok := range []string{
		"site/fg/gw/reply/ctl-a",
		"site/fg/gw/reply/ctl-a/run-7",
		"site/fg/gw/reply/" + strings.Repeat("x", MaxReply-len("site/fg/gw/reply/")),
		tp.Reply("ünïcode"),
	} {
		if err := tp.CheckReply(ok); err != nil {
			t.Errorf("CheckReply(%q) = %v, want nil", ok, err)
		}
	}
	for _, tt := range []struct{ topic, want string }{
		{"", "reply is empty"},
		{"site/fg/gw/reply/" + strings.Repeat("x", MaxReply), "the limit is 256"},
		{"site/fg/gw/reply/+", "wildcard"},
		{"site/fg/gw/reply/ctl-a/#", "wildcard"},
		{"site/fg/gw/reply/a\x00b", "U+0000"},
		{"site/fg/gw/reply/", "outside this gateway's reply topics: use site/fg/gw/reply/<your client id>"},
		{"site/fg/gw/reply", "outside"},
		{"site/fg/other/reply/ctl-a", "outside"},
		{"fencegate/gw/reply/ctl-a", "outside"},
		{"site/fg/gw/pump/result", "outside"},
		{"site/fg/gw/reply//x", "empty level"},
		{"site/fg/gw/reply/ctl-a/", "empty level"},
		{"site/fg/gw/reply/set", "one of the gateway's own topics"},
		{"site/fg/gw/reply/state", "one of the gateway's own topics"},
		{"site/fg/gw/reply/result", "one of the gateway's own topics"},
	} {
		err := tp.CheckReply(tt.topic)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("CheckReply(%q) = %v, want an error with %q", tt.topic, err, tt.want)
		}
	}
	if got := tp.ReplyFilter(); got != "site/fg/gw/reply/#" {
		t.Errorf("ReplyFilter() = %q", got)
	}
}

// CheckCommand refuses what the gateway's decoder would reject, and
// accepts what it reads back unchanged.
func TestCheckCommand(t *testing.T) {
	ok := []fence.Command{
		{Actuator: "pump", Fence: fence.Fence{Token: 1}},
		{Actuator: "door", ID: "é", Fence: fence.Fence{Token: fence.MaxToken, Seq: fence.MaxSeq}, Pulse: fence.MaxPulse},
		{Actuator: "heater", Fence: fence.Fence{Token: 2}, Reset: true},
	}
	for _, c := range ok {
		if err := CheckCommand(c); err != nil {
			t.Errorf("CheckCommand(%+v) = %v", c, err)
		}
	}
	bad := []fence.Command{
		{Actuator: "pump", State: fence.StateOn},
		{Actuator: "pump", Fence: fence.Fence{Token: fence.MaxToken + 1}},
		{Actuator: "pump", Fence: fence.Fence{Token: 1, Seq: fence.MaxSeq + 1}},
		{Actuator: "pump", Fence: fence.Fence{Token: 1}, State: fence.State(7)},
		{Actuator: "door", Fence: fence.Fence{Token: 1}, Pulse: fence.MaxPulse + time.Millisecond},
		{Actuator: "door", Fence: fence.Fence{Token: 1}, Pulse: 1500 * time.Microsecond},
		{Actuator: "door", Fence: fence.Fence{Token: 1}, Pulse: -time.Second},
		{Actuator: "door", Fence: fence.Fence{Token: 1}, Pulse: time.Second, State: fence.StateOff},
		{Actuator: "heater", Fence: fence.Fence{Token: 1}, Reset: true, State: fence.StateOff},
		{Actuator: "pump", Fence: fence.Fence{Token: 1}, ID: strings.Repeat("x", MaxText+1)},
		{Actuator: "pump", Fence: fence.Fence{Token: 1}, Holder: "\xff"},
		{Actuator: "pump", Fence: fence.Fence{Token: 1}, Signer: "a"},
		{Actuator: "pump", Fence: fence.Fence{Token: 1}, Signer: "a", Sig: []byte{1, 2}},
		{Actuator: "", Fence: fence.Fence{Token: 1}},
		{Actuator: "a/b", Fence: fence.Fence{Token: 1}},
		{Actuator: "+", Fence: fence.Fence{Token: 1}},
	}
	for _, c := range bad {
		if err := CheckCommand(c); err == nil {
			t.Errorf("CheckCommand(%+v) accepts it", c)
		}
	}
}
