package config

import (
	"fmt"
	"slices"
	"strings"

	"github.com/fencegate/fencegate/sign"
)

// Controller is a controller whose signed commands the gateway takes (see
// package sign).
type Controller struct {
	// Name is what its commands carry as "signer".
	Name string `yaml:"name"`
	// PublicKey is its public key, "ed25519:<base64>": the line gateway
	// keygen --out PATH writes in PATH.pub.
	PublicKey string `yaml:"public_key"`
	// Scopes are the fence scopes whose actuators it may command.
	Scopes []string `yaml:"scopes"`
}

// SignPolicy returns the gateway's signature policy. Call it on a
// configuration that Parse or Load returned: their check made sure every
// public key parses.
func (c *Config) SignPolicy() *sign.Policy {
	p := &sign.Policy{GatewayID: c.ID, Required: map[string]bool{}}
	for _, a := range c.Actuators {
		if c.RequireSignature || a.RequireSignature {
			p.Required[a.Name] = true
		}
	}
	for _, ctl := range c.Controllers {
		key, err := sign.ParsePublicKey(ctl.PublicKey)
		if err != nil {
			key = nil // never verifies; check reported it
		}
		p.Controllers = append(p.Controllers, sign.Controller{Name: ctl.Name, Key: key, Scopes: slices.Clone(ctl.Scopes)})
	}
	return p
}

// Signing describes the signature policy for people, without keys: the
// controllers and their scopes, and which actuators take signed commands
// only.
func (c *Config) Signing() string {
	var req []string
	for _, a := range c.Actuators {
		if c.RequireSignature || a.RequireSignature {
			req = append(req, a.Name)
		}
	}
	var ctls []string
	for _, ctl := range c.Controllers {
		ctls = append(ctls, fmt.Sprintf("%s (scopes %s)", ctl.Name, strings.Join(ctl.Scopes, ", ")))
	}
	s := "no controllers"
	if len(ctls) > 0 {
		s = fmt.Sprintf("%d controllers: %s", len(ctls), strings.Join(ctls, "; "))
	}
	switch {
	case len(req) == 0:
		return s + "; no actuator requires signed commands"
	case len(req) == len(c.Actuators):
		return s + "; every actuator requires signed commands"
	}
	return s + "; signed commands required by " + strings.Join(req, ", ")
}

// checkSigning checks require_signature and controllers. Its messages
// never repeat a public_key's value: a private key pasted there by mistake
// must not reach a log or a terminal.
func (c *Config) checkSigning() []error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }

	scopes := map[string]bool{}
	var scopeNames []string
	for _, a := range c.Actuators {
		if a.Scope != "" && !scopes[a.Scope] {
			scopes[a.Scope] = true
			scopeNames = append(scopeNames, a.Scope)
		}
	}
	names := nameSet{}
	keys := map[string]string{}
	for i := range c.Controllers {
		ctl := &c.Controllers[i]
		it := itemOf("controllers", "controller", i, ctl.Name)
		if msg := names.check(ctl.Name, c.lines.of(it.path+".name"), "name is required (what its commands carry as signer, e.g. ctl-a)", false); msg != "" {
			errs = append(errs, it.errf("%s", msg))
		}
		if ctl.PublicKey == "" {
			errs = append(errs, it.errf("public_key is required: the line gateway keygen --out PATH wrote in PATH.pub"))
		} else if key, err := sign.ParsePublicKey(ctl.PublicKey); err != nil {
			errs = append(errs, it.errf("public_key: %s", strings.TrimPrefix(err.Error(), "sign: ")))
		} else if other, dup := keys[string(key)]; dup {
			errs = append(errs, it.errf("public_key is the same as controller %q's; give each controller a key pair of its own (gateway keygen)", other))
		} else {
			keys[string(key)] = ctl.Name
		}
		if len(ctl.Scopes) == 0 {
			errs = append(errs, it.errf("scopes: name at least one fence scope it may command (scopes: %s)", strings.Join(scopeNames, ", ")))
		}
		seen := map[string]bool{}
		for j, s := range ctl.Scopes {
			at := fmt.Sprintf("scopes[%d]", j)
			switch {
			case seen[s]:
				errs = append(errs, it.fieldErrf(at, "scopes: %q is listed twice", s))
			case !scopes[s]:
				errs = append(errs, it.fieldErrf(at, "scopes: no actuator is in scope %q (probably a typo; the scopes are %s)", s, strings.Join(scopeNames, ", ")))
			}
			seen[s] = true
		}
	}
	if len(c.Controllers) == 0 {
		const fix = "nothing could ever be applied; add the controllers that sign commands under controllers: (gateway keygen makes their keys)"
		if c.RequireSignature {
			bad("require_signature is true but no controllers are configured: %s", fix)
		}
		for i, a := range c.Actuators {
			if a.RequireSignature && !c.RequireSignature {
				errs = append(errs, itemOf("actuators", "actuator", i, a.Name).errf("require_signature is true but no controllers are configured: %s", fix))
			}
		}
	}
	return errs
}

// pemBlock finds a PEM block pasted into a configuration document (a key
// meant for public_key, or the TLS files' contents). It is reported
// before the document is parsed, and without its text: YAML's syntax
// errors would quote the block's lines, and a private key must never
// reach a log or a terminal.
func pemBlock(b []byte) error {
	for i, line := range strings.Split(string(b), "\n") {
		_, rest, ok := strings.Cut(line, "-----BEGIN ")
		if !ok {
			continue
		}
		kind, _, ok := strings.Cut(rest, "-----")
		if !ok {
			continue
		}
		msg := fmt.Sprintf("a PEM block (%s) is pasted here; the configuration takes none: a controller's public_key is the one line \"ed25519:...\" of the PATH.pub that gateway keygen --out PATH wrote", kind)
		if strings.Contains(kind, "PRIVATE") {
			msg += "; a private key never belongs on the gateway: delete it here, and make the controller a new key pair, since this one has been copied"
		}
		return problem{i + 1, msg}
	}
	return nil
}
