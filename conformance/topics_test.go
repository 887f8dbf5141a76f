package conformance_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/fencegate/fencegate/client"
	"github.com/fencegate/fencegate/wire"
)

// Given is a value as a program hands it to a client: Type string (Value
// is the text), number (Value is its JavaScript and Python spelling,
// NaN, Infinity and 1e999 included) or bool (true or false).
type Given struct {
	Type  string `json:"type"`
	Value string `json:"value"`
}

// raw is g as it would stand in a payload if a client sent it as given:
// what the gateway's decoder would read.
func (g Given) raw() string {
	if g.Type == "string" {
		b, _ := json.Marshal(g.Value)
		return string(b)
	}
	return g.Value
}

// dutyGiven is a set-point command to the fan whose duty is given as
// value, of type typ.
func dutyGiven(typ, value string) Command {
	return Command{Actuator: "fan", Token: "1", DutyGiven: &Given{Type: typ, Value: value}}
}

// Text is a string of the vector files that may hold what a broker
// refuses in a topic. It is written with every code point
// wire.CheckTopicText refuses as a \u escape (a pair of them above
// U+FFFF), so that the files stay readable, and with a surrogate that Go
// holds as its three bytes (ED A0 80 for U+D800: not UTF-8, as a lone
// surrogate is not) as the lone \u escape JavaScript and Python read
// into a string that holds it.
type Text string

func (t Text) MarshalJSON() ([]byte, error) {
	s := string(t)
	var b bytes.Buffer
	b.WriteByte('"')
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			if i+3 <= len(s) && s[i] == 0xed && s[i+1]&0xe0 == 0xa0 && s[i+2]&0xc0 == 0x80 {
				fmt.Fprintf(&b, `\u%04x`, rune(s[i]&0x0f)<<12|rune(s[i+1]&0x3f)<<6|rune(s[i+2]&0x3f))
				i += 3
				continue
			}
			return nil, fmt.Errorf("%q: byte %d is neither UTF-8 nor a surrogate", s, i)
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case wire.CheckTopicText(string(r)) != nil:
			if r > 0xffff {
				hi, lo := utf16.EncodeRune(r)
				fmt.Fprintf(&b, `\u%04x\u%04x`, hi, lo)
			} else {
				fmt.Fprintf(&b, `\u%04x`, r)
			}
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	b.WriteByte('"')
	return b.Bytes(), nil
}

func (t *Text) UnmarshalJSON(data []byte) error {
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		return err
	}
	if !bytes.Contains(data, []byte(`\u`)) {
		*t = Text(s)
		return nil
	}
	// By hand, to keep a lone surrogate as Go's three bytes rather than
	// U+FFFD, as encoding/json reads it.
	in := data[1 : len(data)-1]
	var out []byte
	hex4 := func(i int) rune {
		v, _ := strconv.ParseUint(string(in[i:i+4]), 16, 16)
		return rune(v)
	}
	for i := 0; i < len(in); i++ {
		if in[i] != '\\' {
			out = append(out, in[i])
			continue
		}
		i++
		switch in[i] {
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r := hex4(i + 1)
			i += 4
			if utf16.IsSurrogate(r) && r < 0xdc00 && i+6 < len(in) && in[i+1] == '\\' && in[i+2] == 'u' {
				if lo := hex4(i + 3); lo >= 0xdc00 && lo <= 0xdfff {
					out = utf8.AppendRune(out, utf16.DecodeRune(r, lo))
					i += 6
					continue
				}
			}
			if utf16.IsSurrogate(r) {
				out = append(out, 0xe0|byte(r>>12), 0x80|byte(r>>6)&0x3f, 0x80|byte(r)&0x3f)
			} else {
				out = utf8.AppendRune(out, r)
			}
		default: // " \ /
			out = append(out, in[i])
		}
	}
	*t = Text(out)
	return nil
}

// ReplyCase is a reply topic a client makes, or is asked for, or refuses.
type ReplyCase struct {
	Name     string `json:"name"`
	Prefix   string `json:"prefix"`
	Gateway  string `json:"gateway"`
	ClientID Text   `json:"client_id"`
	Username Text   `json:"username,omitempty"`
	// Asked is the reply topic the controller asks for (Go's
	// Options.Reply, Python's reply=); "": the one made of its client id
	// and user name.
	Asked Text `json:"asked,omitempty"`
	// Reply is the topic the client's commands name; "" if it is
	// refused.
	Reply   Text `json:"reply,omitempty"`
	Refused bool `json:"refused,omitempty"`
	// Why names what is at fault in a refused case: client_id, username
	// or reply (the topic asked for).
	Why string `json:"why,omitempty"`
}

// replyCases are the reply topics, as the Go client makes and checks them.
func replyCases(t *testing.T) []ReplyCase {
	type in struct {
		name               string
		client, user, asks string
		why                string
	}
	ins := []in{
		{name: "a client id", client: "ctl-7f3a"},
		{name: "a user name, then the client id", client: "ctl-1", user: "irrigation"},
		{name: "é in the client id", client: "ctl-é"},
		{name: "日本 in the user name", client: "c1", user: "日本"},
		{name: "an emoji (above U+FFFF) in the client id", client: "ctl-🌱"},
		{name: "U+00A0 (no-break space) in the client id", client: "ctl\u00a0a"},
		{name: "U+FFFD in the client id", client: "ctl-\ufffd"},
		{name: "U+FDCF and U+FDF0, beside the non-characters", client: "a\ufdcfb\ufdf0c"},
		{name: "a reply topic asked for, with levels of its own", client: "c1", asks: "fencegate/gw/reply/ops/run-1"},
		{name: "a reply topic asked for: the user name is in no topic", client: "c1", user: "ops\n", asks: "fencegate/gw/reply/ops/1"},

		{name: "U+0000 in the client id", client: "ctl\x00", why: "client_id"},
		{name: "U+000A (line feed) in the client id", client: "ctl\n", why: "client_id"},
		{name: "U+0001 in the client id", client: "\x01ctl", why: "client_id"},
		{name: "U+0007 (bell) in the client id", client: "ctl\a", why: "client_id"},
		{name: "U+001B (escape) in the client id", client: "ctl\x1b[0m", why: "client_id"},
		{name: "U+007F (delete) in the client id", client: "ctl\x7f", why: "client_id"},
		{name: "U+0085 (next line) in the client id", client: "ctl\u0085", why: "client_id"},
		{name: "U+009F in the client id", client: "ctl\u009f", why: "client_id"},
		{name: "U+FFFE in the client id", client: "ctl\ufffe", why: "client_id"},
		{name: "U+FFFF in the client id", client: "ctl\uffff", why: "client_id"},
		{name: "U+1FFFE in the client id", client: "ctl\U0001fffe", why: "client_id"},
		{name: "U+10FFFF in the client id", client: "ctl\U0010ffff", why: "client_id"},
		{name: "U+FDD0 in the client id", client: "ctl\ufdd0", why: "client_id"},
		{name: "U+FDEF in the client id", client: "ctl\ufdef", why: "client_id"},
		{name: "a lone surrogate U+D800 in the client id", client: "ctl\xed\xa0\x80", why: "client_id"},
		{name: "a lone surrogate U+DFFF in the client id", client: "ctl\xed\xbf\xbf", why: "client_id"},
		{name: "a / in the client id", client: "ctl/a", why: "client_id"},
		{name: "a wildcard in the client id", client: "ctl+a", why: "client_id"},
		{name: "a client id that makes a command topic (reply/set)", client: "set", why: "client_id"},
		{name: "a client id that makes the reply topic longer than 256 bytes", client: strings.Repeat("c", 240), why: "client_id"},
		{name: "U+000A in the user name", client: "c1", user: "ops\n", why: "username"},
		{name: "U+0085 in the user name", client: "c1", user: "ops\u0085", why: "username"},
		{name: "U+FFFF in the user name", client: "c1", user: "ops\uffff", why: "username"},
		{name: "a lone surrogate in the user name", client: "c1", user: "\xed\xb0\x80ops", why: "username"},
		{name: "a # in the user name", client: "c1", user: "ops#", why: "username"},
		{name: "U+001B in a reply topic asked for", client: "c1", asks: "fencegate/gw/reply/ops\x1b", why: "reply"},
		{name: "U+FDEF in a reply topic asked for", client: "c1", asks: "fencegate/gw/reply/ops\ufdef", why: "reply"},
		{name: "a lone surrogate in a reply topic asked for", client: "c1", asks: "fencegate/gw/reply/\xed\xa0\x80", why: "reply"},
		{name: "a reply topic asked for outside the gateway's", client: "c1", asks: "fencegate/other/reply/c1", why: "reply"},
		{name: "a reply topic asked for with no level after reply/", client: "c1", asks: "fencegate/gw/reply/", why: "reply"},
		{name: "a reply topic asked for with an empty level", client: "c1", asks: "fencegate/gw/reply/a//b", why: "reply"},
		{name: "a reply topic asked for with a wildcard", client: "c1", asks: "fencegate/gw/reply/#", why: "reply"},
		{name: "a reply topic asked for that is a command topic", client: "c1", asks: "fencegate/gw/reply/set", why: "reply"},
		{name: "a reply topic asked for of 257 bytes", client: "c1", asks: "fencegate/gw/reply/" + strings.Repeat("r", 257-len("fencegate/gw/reply/")), why: "reply"},
	}
	var out []ReplyCase
	for _, x := range ins {
		c := ReplyCase{Name: x.name, Prefix: wire.DefaultPrefix, Gateway: "gw", ClientID: Text(x.client), Username: Text(x.user), Asked: Text(x.asks), Why: x.why}
		reply, err := c.options().ReplyTopic()
		if (err != nil) != (x.why != "") {
			t.Fatalf("%s: the Go client says %q, %v; the case says refused %v", x.name, reply, err, x.why != "")
		}
		c.Reply, c.Refused = Text(reply), err != nil
		out = append(out, c)
	}
	return out
}

func (c ReplyCase) options() client.Options {
	return client.Options{Prefix: c.Prefix, GatewayID: c.Gateway, ClientID: string(c.ClientID), Username: string(c.Username), Reply: string(c.Asked)}
}

// whyWords is what the Go client's error names for each why.
var whyWords = map[string]string{"client_id": "client id", "username": "user name", "reply": "client: Reply:"}

// The Go client makes every reply topic of commands.json, and refuses
// every refused one before it connects, naming what is at fault.
func TestReplyTopics(t *testing.T) {
	var v Commands
	readJSON(t, "commands.json", &v)
	if len(v.ReplyTopics) == 0 {
		t.Fatal("commands.json has no reply_topics")
	}
	for _, rc := range v.ReplyTopics {
		reply, err := rc.options().ReplyTopic()
		switch {
		case rc.Refused && err == nil:
			t.Errorf("%s: the Go client takes %q", rc.Name, reply)
		case rc.Refused && !strings.Contains(err.Error(), whyWords[rc.Why]):
			t.Errorf("%s: %v; want it to name the %s", rc.Name, err, whyWords[rc.Why])
		case !rc.Refused && (err != nil || reply != string(rc.Reply)):
			t.Errorf("%s: %q, %v; want %q", rc.Name, reply, err, rc.Reply)
		}
		if err != nil && strings.ContainsAny(err.Error(), "\x00\n\x1b") {
			t.Errorf("%s: the error holds the character raw: %q", rc.Name, err)
		}
	}
	// Dial refuses them the same way, before it connects.
	for _, rc := range v.ReplyTopics {
		if !rc.Refused {
			continue
		}
		o := rc.options()
		o.Broker = "tcp://127.0.0.1:1"
		if o.Username != "" {
			o.Password = "p"
		}
		if _, err := client.Dial(t.Context(), o); err == nil || !strings.Contains(err.Error(), whyWords[rc.Why]) {
			t.Errorf("%s: Dial = %v; want it refused, naming the %s", rc.Name, err, whyWords[rc.Why])
		}
	}
}

// Every duty commands.json gives as a program would (duty_given) and
// refuses is one the gateway refuses as sent, and every one it sends is
// the duty the case's payload carries.
func TestDutyGiven(t *testing.T) {
	var v Commands
	readJSON(t, "commands.json", &v)
	n := 0
	for _, rc := range v.Refused {
		g := rc.Command.DutyGiven
		if g == nil {
			continue
		}
		n++
		payload := `{"token":1,"duty":` + g.raw() + `}`
		if r, err := wire.DecodeRequest("fan", []byte(payload)); err == nil {
			t.Errorf("%s: the gateway takes %s as %+v", rc.Name, payload, r)
		}
	}
	if n == 0 {
		t.Error("commands.json refuses no duty_given")
	}
	for _, cc := range v.Cases {
		if g := cc.Command.DutyGiven; g != nil {
			f, err := strconv.ParseFloat(g.Value, 64)
			d, err2 := strconv.ParseFloat(cc.Command.Duty, 64)
			if g.Type != "number" || err != nil || err2 != nil || f != d {
				t.Errorf("%s: duty_given %+v is not the number %s", cc.Name, g, cc.Command.Duty)
			}
		}
	}
}
