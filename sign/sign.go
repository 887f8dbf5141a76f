// Package sign signs and verifies fencegate commands with Ed25519, so that
// a gateway can tell which controller sent a command and refuse commands
// that no configured controller sent, or that one sent for another
// actuator, another gateway or with other fields.
//
// # Canonical encoding
//
// A signature covers [Canonical]: the ASCII bytes "fencegate-command-v1",
// then the gateway id, the actuator, the token, the seq, the state, the
// command id and the holder, in that order. Text fields are a 4-byte
// big-endian length followed by their UTF-8 bytes; the state is "on", "off"
// or "" (fence-only); token and seq are 8-byte big-endian unsigned
// integers. A pulse command appends its pulse_ms, 8 bytes big-endian, and
// a reset command the byte 1; a command with neither ends at the holder.
// A set-point command signs the state "duty" (never a state of its own:
// no on/off signature can be replayed as a set-point) and appends the
// duty in hundredths of a percent, 8 bytes big-endian, then its frequency
// in hertz, 8 bytes big-endian, if it has one. docs/protocol.md
// specifies it byte by byte, with test vectors that a test of this
// package checks.
//
// # Keys
//
// [WriteKeyPair] writes a controller's key pair: the private key as a
// PKCS#8 PEM file (mode 0600), which only the controller reads, and the
// public key as a line "ed25519:<base64>", which goes into the gateway's
// configuration. The gateway never reads a private key.
//
// # Policy
//
// [Policy.Authorize] is the gateway's check of a command against its
// configured controllers: a signature, if present, must verify with the
// named controller's key, and the controller must be allowed the
// actuator's scope; an actuator that requires signatures refuses unsigned
// commands.
//
// This package imports only the standard library and package fence.
package sign

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/fencegate/fencegate/fence"
)

// Magic starts the canonical encoding of version 1.
const Magic = "fencegate-command-v1"

// KeyPrefix starts a public key as the configuration writes it.
const KeyPrefix = "ed25519:"

// Canonical returns the bytes a signature of c for the gateway gatewayID
// covers (see the package comment). c's Signer and Sig are not part of them.
func Canonical(gatewayID string, c fence.Command) []byte {
	b := make([]byte, 0, len(Magic)+5*4+2*8+len(gatewayID)+len(c.Actuator)+3+len(c.ID)+len(c.Holder))
	b = append(b, Magic...)
	b = appendText(b, gatewayID)
	b = appendText(b, c.Actuator)
	b = binary.BigEndian.AppendUint64(b, c.Fence.Token)
	b = binary.BigEndian.AppendUint64(b, c.Fence.Seq)
	state := c.Asks().String() // a pulse signs as on, with or without "state":"on"
	if c.Setpoint {
		state = "duty"
	}
	b = appendText(b, state)
	b = appendText(b, c.ID)
	b = appendText(b, c.Holder)
	if c.Pulse > 0 {
		b = binary.BigEndian.AppendUint64(b, uint64(c.Pulse.Milliseconds()))
	}
	if c.Setpoint {
		b = binary.BigEndian.AppendUint64(b, uint64(c.Duty))
		if c.Frequency > 0 {
			b = binary.BigEndian.AppendUint64(b, uint64(c.Frequency))
		}
	}
	if c.Reset {
		b = append(b, 1)
	}
	return b
}

func appendText(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
	return append(b, s...)
}

// Sign returns c signed by the controller signer with key, for the gateway
// gatewayID: c with Signer and Sig set. Sign the command exactly as it
// will be sent: its id included.
func Sign(key ed25519.PrivateKey, signer, gatewayID string, c fence.Command) fence.Command {
	c.Signer = signer
	c.Sig = ed25519.Sign(key, Canonical(gatewayID, c))
	return c
}

// Verify reports whether c.Sig is a signature of c for the gateway
// gatewayID by the key pub. It does not look at c.Signer.
func Verify(pub ed25519.PublicKey, gatewayID string, c fence.Command) bool {
	if len(pub) != ed25519.PublicKeySize || len(c.Sig) != ed25519.SignatureSize {
		return false
	}
	return ed25519.Verify(pub, Canonical(gatewayID, c), c.Sig)
}

// FormatPublicKey returns pub as the configuration's public_key takes it:
// "ed25519:" and the standard base64 (with padding) of its 32 bytes.
func FormatPublicKey(pub ed25519.PublicKey) string {
	return KeyPrefix + base64.StdEncoding.EncodeToString(pub)
}

// ErrPublicKey is returned (wrapped) by ParsePublicKey. Its text never
// repeats the value: a private key pasted by mistake must not end up in a
// log.
var ErrPublicKey = errors.New("sign: not a public key: want ed25519:<base64 of 32 bytes>, as gateway keygen writes it in PATH.pub")

// ParsePublicKey parses a public key written by FormatPublicKey. Space
// around it is ignored; anything else that differs is an error.
func ParsePublicKey(s string) (ed25519.PublicKey, error) {
	s = strings.TrimSpace(s)
	rest, ok := strings.CutPrefix(s, KeyPrefix)
	if !ok {
		return nil, fmt.Errorf("%w (it does not start with %q)", ErrPublicKey, KeyPrefix)
	}
	b, err := decodeStrict(rest)
	if err != nil {
		return nil, fmt.Errorf("%w (the part after %q is not standard base64 with padding)", ErrPublicKey, KeyPrefix)
	}
	if len(b) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("%w (it holds %d bytes, not %d; is it a private key? those stay with the controller)", ErrPublicKey, len(b), ed25519.PublicKeySize)
	}
	return ed25519.PublicKey(b), nil
}

// decodeStrict decodes standard base64 that is written the one way the
// encoder writes it: encoding/base64 would also take line breaks.
func decodeStrict(s string) ([]byte, error) {
	b, err := base64.StdEncoding.Strict().DecodeString(s)
	if err != nil || base64.StdEncoding.EncodeToString(b) != s {
		return nil, errors.New("sign: not canonical base64")
	}
	return b, nil
}

// Controller is one controller a gateway takes signed commands from.
type Controller struct {
	Name string
	Key  ed25519.PublicKey
	// Scopes are the fence scopes whose actuators it may command.
	Scopes []string
}

// Policy is a gateway's signature policy.
type Policy struct {
	// GatewayID is the gateway's id, which every signature covers.
	GatewayID   string
	Controllers []Controller
	// Required holds the actuators that take signed commands only.
	Required map[string]bool
}

// Authorize checks command c to an actuator of scope against p. It returns
// a fence.Reason* code and an error for a command to refuse, "" and nil
// for one to decide. In this order:
//
//   - a command that carries a signature (or a signer) is checked even
//     where none is required: its signer must be a configured controller
//     (ReasonUnknownSigner), the signature must verify with that
//     controller's key over c for this gateway (ReasonBadSignature), and
//     the controller must be allowed scope (ReasonOutOfScope);
//   - an unsigned command to an actuator that requires signatures is
//     refused (ReasonUnsigned).
//
// It reads no clock, disk or network.
func (p *Policy) Authorize(c fence.Command, scope string) (reason string, err error) {
	if c.Signer == "" && c.Sig == nil {
		if p.Required[c.Actuator] {
			return fence.ReasonUnsigned, fmt.Errorf("actuator %s takes signed commands only; sign it with a controller's key (gateway send --key PATH.key --signer NAME, or client.Options.Signer and Key)", c.Actuator)
		}
		return "", nil
	}
	var ctl *Controller
	for i := range p.Controllers {
		if p.Controllers[i].Name == c.Signer {
			ctl = &p.Controllers[i]
			break
		}
	}
	if ctl == nil {
		if c.Signer == "" {
			return fence.ReasonUnknownSigner, errors.New("the command has a sig but no signer; name the controller that signed it")
		}
		return fence.ReasonUnknownSigner, fmt.Errorf("signer %q is not a controller of gateway %s; add it under controllers: in the gateway's configuration, or sign with a configured controller's name", c.Signer, p.GatewayID)
	}
	if !Verify(ctl.Key, p.GatewayID, c) {
		return fence.ReasonBadSignature, fmt.Errorf("the signature does not verify with the key of controller %s for this command to %s on gateway %s: "+
			"it was made for another gateway, actuator or command, or with another key than the public_key configured for %s", c.Signer, c.Actuator, p.GatewayID, c.Signer)
	}
	if !slices.Contains(ctl.Scopes, scope) {
		return fence.ReasonOutOfScope, fmt.Errorf("controller %s may command the scopes %s, and actuator %s is in scope %s; add %s to its scopes if it should",
			c.Signer, scopeList(ctl.Scopes), c.Actuator, scope, scope)
	}
	return "", nil
}

func scopeList(s []string) string {
	if len(s) == 0 {
		return "(none)"
	}
	return strings.Join(s, ", ")
}
