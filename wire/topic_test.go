package wire

import (
	"strings"
	"testing"

	"github.com/fencegate/fencegate/fence"
)

// hostileText holds one of each kind of code point CheckTopicText must
// refuse, and invalid UTF-8.
var hostileText = map[string]string{
	"U+0000":       "a\x00b",
	"U+0001":       "a\x01b",
	"U+0007":       "a\ab",
	"U+000A":       "a\nb",
	"U+000D":       "a\rb",
	"U+001B":       "a\x1bb",
	"U+001F":       "a\x1fb",
	"U+007F":       "a\x7fb",
	"U+0080":       "a\u0080b",
	"U+009F":       "a\u009fb",
	"U+FDD0":       "a\ufdd0b",
	"U+FDEF":       "a\ufdefb",
	"U+FFFE":       "a\ufffeb",
	"U+FFFF":       "a\uffffb",
	"U+1FFFE":      "a\U0001fffeb",
	"U+10FFFF":     "a\U0010ffffb",
	"lone byte 80": "a\x80b",
	"truncated":    "a\xe2\x82",
	"surrogate":    "a\xed\xa0\x80b",
	"overlong":     "a\xc0\xafb",
	"above 10FFFF": "a\xf4\x90\x80\x80b",
	"lone byte FF": "\xff",
	"U+0085 (NEL)": "a\xc2\x85b",
}

func TestCheckTopicTextRefuses(t *testing.T) {
	for name, s := range hostileText {
		if err := CheckTopicText(s); err == nil {
			t.Errorf("%s: %q passed", name, s)
		}
	}
}

func TestCheckTopicTextTakes(t *testing.T) {
	for _, s := range []string{"", "plain", "a b", "a~b!", "é", "ü/ß", "日本", "\u00a0", "\ufffd", "\U0001F600", "\ufdcf", "\ufdf0", "\ufffd", "\U0010fffd"} {
		if err := CheckTopicText(s); err != nil {
			t.Errorf("%q: %v", s, err)
		}
	}
}

func TestCheckReplyRefusesHostileText(t *testing.T) {
	tp := Topics{GatewayID: "g"}
	for name, s := range hostileText {
		err := tp.CheckReply(tp.ReplyBase() + s)
		if err == nil {
			t.Errorf("%s: reply topic %q passed", name, s)
		} else if strings.ContainsAny(err.Error(), "\x00\n\r\x1b") {
			t.Errorf("%s: the error holds the character raw: %q", name, err)
		}
	}
	if err := tp.CheckReply(tp.Reply("ctl-é")); err != nil {
		t.Errorf("a printable reply topic: %v", err)
	}
}

func TestCheckTopic(t *testing.T) {
	for _, s := range []string{"", "a/+/b", "a/#", "a\nb", strings.Repeat("a", MaxTopic+1)} {
		if CheckTopic(s) == nil {
			t.Errorf("%.40q passed", s)
		}
	}
	if err := CheckTopic(strings.Repeat("a", MaxTopic)); err != nil {
		t.Error(err)
	}
}

func TestParseRefusesHostileNames(t *testing.T) {
	tp := Topics{GatewayID: "g"}
	for name, s := range hostileText {
		if a, kind := tp.Parse(tp.Set(s)); kind != KindNone {
			t.Errorf("%s: actuator %q taken as %q", name, s, a)
		}
	}
}

// A controller's check refuses an actuator name the broker would refuse
// in the command topic, as the gateway's Parse does: a client that
// published on it would lose its connection.
func TestCheckCommandRefusesHostileActuators(t *testing.T) {
	for name, s := range hostileText {
		if err := CheckCommand(fence.Command{Actuator: s, Fence: fence.Fence{Token: 1}}); err == nil {
			t.Errorf("%s: actuator %q passed", name, s)
		} else if strings.ContainsAny(err.Error(), "\x00\n\r\x1b") {
			t.Errorf("%s: the error holds the character raw: %q", name, err)
		}
	}
	for _, s := range []string{"pump", "é", "日本", "\U0001F600", "\u00a0"} {
		if err := CheckCommand(fence.Command{Actuator: s, Fence: fence.Fence{Token: 1}}); err != nil {
			t.Errorf("actuator %q: %v", s, err)
		}
	}
}

func TestCheckPrefix(t *testing.T) {
	for _, p := range []string{"a/+", "#", "/a", "a/", "a//b", "a\nb", "a\ufffe", "\xff"} {
		if CheckPrefix(p) == nil {
			t.Errorf("%q passed", p)
		}
	}
	for _, p := range []string{"", "fencegate", "site/é/fencegate", "home assistant"} {
		if err := CheckPrefix(p); err != nil {
			t.Errorf("%q: %v", p, err)
		}
	}
}

// TestLoneSurrogateRefused: a lone surrogate escape in a string field is
// refused, not taken as U+FFFD (the reply topic would be another than the
// one sent); a pair, an escaped backslash before u, and U+FFFD itself are
// taken.
func TestLoneSurrogateRefused(t *testing.T) {
	tp := Topics{GatewayID: "g"}
	for _, v := range []string{`a\ud800b`, `a\udc00b`, `a\ud800`, `a\ud800\ud800`, `a\udbff\u0041`, `\uDFFF`} {
		for _, key := range []string{"reply", "id", "holder"} {
			val := v
			if key == "reply" {
				val = tp.ReplyBase() + v
			}
			_, err := DecodeRequest("pump", []byte(`{"token":5,"state":"on","`+key+`":"`+val+`"}`))
			if err == nil || !strings.Contains(err.Error(), "lone surrogate") {
				t.Errorf("%s %s: %v; want it refused as a lone surrogate", key, v, err)
			}
		}
	}
	for _, v := range []string{`a\ud83d\ude00b`, `a\\ud800b`, `\ufffd`, `a\\\ud83d\ude00`} {
		if _, err := DecodeRequest("pump", []byte(`{"token":5,"state":"on","holder":"`+v+`"}`)); err != nil {
			t.Errorf("holder %s: %v", v, err)
		}
	}
}
