package main

import (
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strings"
)

// initHint says how to create a missing store for the configuration at
// cfgPath: the exact gateway init commands, as the user running this
// process (the one the store must belong to), one per floor decision.
func initHint(cfgPath string) string {
	if abs, err := filepath.Abs(cfgPath); err == nil {
		cfgPath = abs
	}
	exe := "gateway"
	if p, err := os.Executable(); err == nil {
		exe = p
	}
	prefix := ""
	if u, err := user.Current(); err == nil && u.Uid != "0" && u.Username != "" {
		prefix = "sudo -u " + u.Username + " "
	}
	cmd := fmt.Sprintf("%s%s init --config %s", prefix, exe, quoteArg(cfgPath))
	return strings.Join([]string{
		"Create the store once, deciding which tokens are already spent (see docs/raspberry-pi.md, \"Creating the fence store\"):",
		"  " + cmd + " --floor-from-etcd http://ETCD:2379",
		"      controllers take tokens from that etcd: every token it ever issued is stale (right after a lost store)",
		"  " + cmd + " --floor N",
		"      every token up to N is stale",
		"  " + cmd + " --new",
		"      only if no controller ever held a token for this gateway",
	}, "\n")
}

// quoteArg quotes s for a POSIX shell if it needs it.
func quoteArg(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\n'\"\\$`!*?[]{}()<>|&;#~") {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
