package wire

import (
	"strconv"
	"time"

	"github.com/fencegate/fencegate/fence"
)

// decodeFast decodes the command almost every controller sends: one flat
// JSON object whose values are strings without escapes and integers
// without sign, fraction or exponent, each field known, once, and valid.
// It is decodeCommand's first try, some ten times cheaper than the
// streaming decoder. ok is false for anything else, valid or not: the
// streaming decoder then decides, and says what is wrong, so every answer
// and every error text is the streaming decoder's (TestDecodeCommandAsBefore
// and FuzzDecodeCommand compare the two). p must be valid UTF-8.
func decodeFast(actuator string, p []byte) (r Request, ok bool) {
	c := &r.Command
	c.Actuator = actuator
	i := skipSpace(p, 0)
	if i >= len(p) || p[i] != '{' {
		return r, false
	}
	i = skipSpace(p, i+1)
	const (
		hasID = 1 << iota
		hasHolder
		hasToken
		hasSeq
		hasState
		hasSigner
		hasSig
		hasPulse
		hasReply
	)
	var seen uint
	for {
		key, n := plainString(p, i)
		if n == 0 {
			return r, false
		}
		i = skipSpace(p, n)
		if i >= len(p) || p[i] != ':' {
			return r, false
		}
		i = skipSpace(p, i+1)
		str, n := plainString(p, i)
		var num uint64
		isNum := false
		if n == 0 {
			if num, n, isNum = plainInteger(p, i); !isNum {
				return r, false
			}
		}
		i = n
		var bit uint
		switch string(key) {
		case "id":
			bit, ok = hasID, !isNum && len(str) <= MaxText
			c.ID = string(str)
		case "holder":
			bit, ok = hasHolder, !isNum && len(str) <= MaxText
			c.Holder = string(str)
		case "token":
			bit, ok = hasToken, isNum && num >= 1 && num <= fence.MaxToken
			c.Fence.Token = num
		case "seq":
			bit, ok = hasSeq, isNum && num <= fence.MaxSeq
			c.Fence.Seq = num
		case "state":
			var err error
			c.State, err = fence.ParseState(string(str))
			bit, ok = hasState, !isNum && err == nil
		case "signer":
			bit, ok = hasSigner, !isNum && len(str) > 0 && len(str) <= MaxText
			c.Signer = string(str)
		case "sig":
			if isNum {
				return r, false
			}
			var err error
			c.Sig, err = decodeSig(string(str))
			bit, ok = hasSig, err == nil
		case "pulse_ms":
			bit, ok = hasPulse, isNum && num >= 1 && num <= maxPulseMs
			c.Pulse = time.Duration(num) * time.Millisecond
		case "reply":
			bit, ok = hasReply, !isNum
			r.Reply = string(str)
		}
		if !ok || bit == 0 || seen&bit != 0 {
			return r, false
		}
		seen |= bit
		i = skipSpace(p, i)
		if i < len(p) && p[i] == ',' {
			i = skipSpace(p, i+1)
			continue
		}
		if i < len(p) && p[i] == '}' {
			i++
			break
		}
		return r, false
	}
	if skipSpace(p, i) != len(p) || seen&hasToken == 0 || (seen&hasSigner == 0) != (seen&hasSig == 0) {
		return r, false
	}
	if c.Pulse > 0 && c.State == fence.StateOff {
		return r, false
	}
	c.State = c.Asks()
	return r, true
}

// skipSpace returns the index of the first byte at or after i that is not
// JSON whitespace.
func skipSpace(p []byte, i int) int {
	for i < len(p) && (p[i] == ' ' || p[i] == '\t' || p[i] == '\n' || p[i] == '\r') {
		i++
	}
	return i
}

// plainString reads the JSON string at p[i] if it has no escape and no
// control character: its contents, and the index after its closing quote
// (0 if there is no such string there).
func plainString(p []byte, i int) ([]byte, int) {
	if i >= len(p) || p[i] != '"' {
		return nil, 0
	}
	for j := i + 1; j < len(p); j++ {
		switch b := p[j]; {
		case b == '"':
			return p[i+1 : j], j + 1
		case b == '\\' || b < 0x20:
			return nil, 0
		}
	}
	return nil, 0
}

// plainInteger reads the JSON integer at p[i] if it has no sign, fraction
// or exponent and fits in a uint64: its value, and the index after it.
func plainInteger(p []byte, i int) (uint64, int, bool) {
	j := i
	for j < len(p) && p[j] >= '0' && p[j] <= '9' {
		j++
	}
	if j == i || (p[i] == '0' && j > i+1) {
		return 0, 0, false // no digit, or a leading zero (not JSON)
	}
	if j < len(p) && (p[j] == '.' || p[j] == 'e' || p[j] == 'E') {
		return 0, 0, false
	}
	v, err := strconv.ParseUint(string(p[i:j]), 10, 64)
	if err != nil {
		return 0, 0, false
	}
	return v, j, true
}
