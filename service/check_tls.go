package service

import (
	"crypto/x509"
	"fmt"
	"strings"
	"time"

	"github.com/fencegate/fencegate/config"
)

// securityFindings say how the broker connection is secured: with which
// CAs and client certificate (warning about one that is not valid at
// now), and where the password comes from, never what it is.
func securityFindings(sec config.Security, now time.Time) []Finding {
	var out []Finding
	set := sec.Settings
	if sec.TLS != nil {
		var parts []string
		if set.TLS.CAFile != "" {
			parts = append(parts, fmt.Sprintf("the broker's certificate must be signed by a CA in %s %s", set.Names.CAFile, set.TLS.CAFile))
		} else {
			parts = append(parts, "the broker's certificate must be signed by a CA this system trusts")
		}
		if set.TLS.ServerName != "" {
			parts = append(parts, fmt.Sprintf("and be for %q", set.TLS.ServerName))
		}
		text := strings.Join(parts, " ")
		warning := false
		if len(sec.TLS.Certificates) > 0 && len(sec.TLS.Certificates[0].Certificate) > 0 {
			c, err := x509.ParseCertificate(sec.TLS.Certificates[0].Certificate[0])
			if err == nil {
				text += fmt.Sprintf("; client certificate %s (%q, valid until %s)", set.TLS.CertFile, c.Subject.CommonName, c.NotAfter.UTC().Format(time.RFC3339))
				switch {
				case now.After(c.NotAfter):
					warning = true
					text += fmt.Sprintf(": it has EXPIRED, and the broker will refuse it; renew %s", set.Names.CertFile)
				case now.Before(c.NotBefore):
					warning = true
					text += fmt.Sprintf(": it is valid only from %s; is this machine's clock right?", c.NotBefore.UTC().Format(time.RFC3339))
				}
			}
		}
		out = append(out, Finding{Step: "tls", Text: text, Warning: warning})
	}
	switch {
	case set.PasswordFrom != "":
		out = append(out, Finding{Step: "password", Text: fmt.Sprintf("user %q, the password from %s", set.Username, set.PasswordFrom)})
	case set.Username != "":
		out = append(out, Finding{Step: "password", Text: fmt.Sprintf("user %q, no password", set.Username)})
	}
	return out
}
