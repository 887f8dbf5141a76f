package wire

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// CheckTopicText says what in s a broker would refuse in a topic, or nil:
// invalid UTF-8, or a code point that MQTT forbids or asks senders to
// avoid and that Mosquitto refuses outright, closing the connection of
// the client that sent it:
//
//   - U+0000 to U+001F and U+007F to U+009F (control characters);
//   - U+D800 to U+DFFF (surrogates: never valid in UTF-8);
//   - U+FDD0 to U+FDEF, and U+xFFFE and U+xFFFF in every plane
//     (non-characters).
//
// A topic the gateway publishes on must pass it: one the broker refuses
// would cost the gateway its connection, and the broker would deliver
// the command that caused it again after the reconnect. s is one topic
// or one level of one; wildcards and lengths are the caller's to check.
func CheckTopicText(s string) error {
	for i, r := range s {
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(s[i:]); size <= 1 {
				return fmt.Errorf("byte %d is not valid UTF-8 (%q)", i, s)
			}
		}
		if why := forbidden(r); why != "" {
			return fmt.Errorf("character %d (U+%04X) is %s, which MQTT brokers refuse in a topic (%q)", utf8.RuneCountInString(s[:i])+1, r, why, s)
		}
	}
	return nil
}

// forbidden says which kind of code point r is if a topic must not hold
// it, or "".
func forbidden(r rune) string {
	switch {
	case r <= 0x1f || r >= 0x7f && r <= 0x9f:
		return "a control character"
	case r >= 0xd800 && r <= 0xdfff:
		return "a surrogate"
	case r >= 0xfdd0 && r <= 0xfdef, r&0xfffe == 0xfffe:
		return "a non-character"
	}
	return ""
}

// CheckTopic says why the gateway must not publish on topic, or nil: it
// is empty, longer than MaxTopic, holds a wildcard (+ #), or fails
// CheckTopicText. Every topic the gateway publishes on passes it first
// (see mqttlink), whatever the topic was built from.
func CheckTopic(topic string) error {
	switch {
	case topic == "":
		return errors.New("the topic is empty")
	case len(topic) > MaxTopic:
		return fmt.Errorf("the topic is %d bytes; MQTT carries at most %d", len(topic), MaxTopic)
	case strings.ContainsAny(topic, "+#"):
		return fmt.Errorf("the topic %q has a wildcard (+ #)", topic)
	}
	return CheckTopicText(topic)
}

// CheckPrefix says why p cannot begin topics the gateway publishes on
// (mqtt.topic_prefix, a discovery prefix), or nil: a wildcard, an empty
// level (a leading, trailing or double /), or what CheckTopicText
// refuses. The empty prefix is the default's, and passes.
func CheckPrefix(p string) error {
	switch {
	case strings.ContainsAny(p, "+#"):
		return errors.New("it has a wildcard (+ #)")
	case strings.HasPrefix(p, "/") || strings.HasSuffix(p, "/") || strings.Contains(p, "//"):
		return errors.New("it has an empty level (a leading, trailing or double /)")
	}
	return CheckTopicText(p)
}

// CheckLevel says why s cannot be one level of a topic the gateway's
// topics are built from (an actuator's name, as a client or a bridge
// names it), or nil: it is empty, holds a wildcard (+ #) or a /, or fails
// CheckTopicText.
func CheckLevel(s string) error {
	switch {
	case s == "":
		return errors.New("it is empty")
	case strings.ContainsAny(s, "+#/"):
		return errors.New("it holds a wildcard (+ #) or a /")
	}
	return CheckTopicText(s)
}
