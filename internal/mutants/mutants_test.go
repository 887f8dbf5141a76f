// Package mutants checks that the test suite catches deliberately broken
// variants of the safety core. Each mutant edits one place in a copy of the
// committed tree (git archive HEAD) and runs the tests that must catch it;
// a mutant whose tests pass is a hole in the suite.
//
// It is slow (a build and a test run per mutant), so it runs only with
// FENCEGATE_MUTANTS=1: `make mutants`, which CI runs.
package mutants

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

type mutant struct {
	name string
	why  string
	file string
	old  string // must occur exactly once in file
	new  string
	pkgs []string // test packages and -run pattern that must fail
	run  string
}

var mutants = []mutant{
	{
		name: "no-fence-check",
		why:  "every command passes the fence (M1)",
		file: "fence/fence.go",
		old:  "\tif current.Less(c.Fence) {\n\t\treturn Decision{Outcome: Applied}",
		new:  "\tif true || current.Less(c.Fence) {\n\t\treturn Decision{Outcome: Applied}",
		pkgs: []string{"./actuator"}, run: "TestPausedControllerInterleavings",
	},
	{
		name: "equal-pair-passes",
		why:  "a pair equal to the fence passes (>= instead of >)",
		file: "fence/fence.go",
		old:  "\tif current.Less(c.Fence) {\n\t\treturn Decision{Outcome: Applied}",
		new:  "\tif current.Less(c.Fence) || current == c.Fence {\n\t\treturn Decision{Outcome: Applied}",
		pkgs: []string{"./fence", "./fencelog"}, run: "TestDecide|TestAdmitSequence",
	},
	{
		name: "fence-not-persisted",
		why:  "the new fence is decided but never written (M2)",
		file: "fencelog/fencelog.go",
		old:  "\t\t\tif err := writeScope(tx, scope, rec); err != nil {\n\t\t\t\treturn err\n\t\t\t}\n\t\t}\n\t\tadm = Admission",
		new:  "\t\t}\n\t\tadm = Admission",
		pkgs: []string{"./fencelog"}, run: "TestPersistsAcrossReopen",
	},
	{
		name: "drive-before-record",
		why:  "the output is driven before the fence is recorded (M3)",
		file: "actuator/actuator.go",
		old:  "\tres := fence.Result{ID: c.ID, Actuator: c.Actuator, Command: c.Fence}\n\tadm, err := b.log.Admit(o.Scope, c, o.scope.rules, b.planner(o, c))",
		new:  "\tres := fence.Result{ID: c.ID, Actuator: c.Actuator, Command: c.Fence}\n\tif c.State != fence.StateNone {\n\t\to.pin.Out(o.level(c.State))\n\t}\n\tadm, err := b.log.Admit(o.Scope, c, o.scope.rules, b.planner(o, c))",
		pkgs: []string{"./actuator"}, run: "TestHandle|TestRecordFailureNeverDrives|TestPausedControllerInterleavings",
	},
	{
		name: "fence-per-actuator",
		why:  "actuators of one scope get a fence each instead of sharing their scope's (M4)",
		file: "actuator/actuator.go",
		old:  "\t\tif s.Scope == \"\" {\n\t\t\ts.Scope = s.Name\n\t\t}\n\t\tboot, err := ParseBoot",
		new:  "\t\ts.Scope = s.Name\n\t\tboot, err := ParseBoot",
		pkgs: []string{"./actuator"}, run: "TestPausedControllerInterleavings",
	},
	{
		name: "lock-released-before-drive",
		why:  "the scope lock is released between the record and the drive",
		file: "actuator/actuator.go",
		old:  "\tres := b.handle(o, c)\n\to.scope.unlock()",
		new:  "\tres := b.handle(o, c, true)\n\to.scope.unlock()",
		pkgs: []string{"./actuator"}, run: "TestDrivesFollowFenceOrder",
	},
	{
		name: "no-duplicate-window",
		why:  "a redelivery of an applied command is answered stale, not duplicate",
		file: "fence/fence.go",
		old:  "\tfor i := len(recent) - 1; i >= 0; i-- {",
		new:  "\tfor i := len(recent) - 1; i >= len(recent); i-- {",
		pkgs: []string{"./fence", "./actuator"}, run: "TestDecide|TestHandle",
	},
	{
		name: "stale-answer-without-fence",
		why:  "a stale answer does not tell the controller the current fence",
		file: "actuator/actuator.go",
		old:  "\tcase fence.Stale:\n\t\tres.Error = adm.Error",
		new:  "\tcase fence.Stale:\n\t\tres.Error = adm.Error\n\t\tres.Fence = fence.Fence{}",
		pkgs: []string{"./actuator"}, run: "TestHandle",
	},
	{
		name: "interlock-ignored",
		why:  "a command turns an interlocked output on while another member is on",
		file: "actuator/actuator.go",
		old:  "\tif o.lock == nil || c.State != fence.StateOn {\n\t\treturn nil\n\t}",
		new:  "\tif true || o.lock == nil || c.State != fence.StateOn {\n\t\treturn nil\n\t}",
		pkgs: []string{"./actuator"}, run: "TestInterlock",
	},
	{
		name: "make-before-break",
		why:  "break-before-make switches the new member on before the others off",
		file: "fence/fence.go",
		old:  "\treturn Effect{Sets: append(sets, Set{c.Actuator, StateOn})}",
		new:  "\treturn Effect{Sets: append([]Set{{c.Actuator, StateOn}}, sets...)}",
		pkgs: []string{"./actuator"}, run: "TestInterlockBreakBeforeMake",
	},
	{
		name: "refusal-keeps-old-fence",
		why:  "a command an interlock refused does not raise the fence, so the displaced holder keeps acting",
		file: "fencelog/fencelog.go",
		old:  "\t\t\trec.Fence = c.Fence\n\t\t\trec.Recent = fence.Remember(rec.Recent, c, eff.Refusal)",
		new:  "\t\t\tif eff.Refusal == nil {\n\t\t\t\trec.Fence = c.Fence\n\t\t\t}\n\t\t\trec.Recent = fence.Remember(rec.Recent, c, eff.Refusal)",
		pkgs: []string{"./actuator"}, run: "TestInterlockRejects",
	},
	{
		name: "no-dead-time",
		why:  "an interlocked output comes on without waiting out the dead time",
		file: "actuator/actuator.go",
		old:  "if wait := time.Until(o.lock.lastOff.Add(o.lock.DeadTime)); wait > 0 {",
		new:  "if wait := time.Duration(0); wait > 0 {",
		pkgs: []string{"./actuator"}, run: "TestInterlockBreakBeforeMake|TestInterlockBoot",
	},
	{
		name: "boot-levels-before-binding",
		why:  "the lines are taken over at levels decided before the store bound moved actuators to their scopes",
		file: "actuator/actuator.go",
		old:  "\tmoved, err := b.log.Bind(scopes)\n\tif err != nil {\n\t\treturn fmt.Errorf(\"actuator: %w\", err)\n\t}",
		new:  "\tdefer b.log.Bind(scopes)\n\tvar moved []string",
		pkgs: []string{"./actuator"}, run: "TestBootLevelsAfterScopeBinding",
	},
	{
		name: "conflict-door-open",
		why:  "commands waiting in the link's queues are still decided after another process was found serving the gateway id",
		file: "mqttlink/instance.go",
		old:  "\tg.conflict = true\n\tg.l.closeDoor()\n",
		new:  "\tg.conflict = true\n",
		pkgs: []string{"./mqttlink"}, run: "TestNoCommandAfterConflict",
	},
	{
		name: "running-neighbour-is-past",
		why:  "a claim of a gateway process that runs on this host is taken for a previous run",
		file: "mqttlink/instance.go",
		old:  "\tcase !g.echoed && g.aliveness(c) == alive:",
		new:  "\tcase false:",
		pkgs: []string{"./cmd/gateway"}, run: "TestSecondInstanceRefused",
	},
	{
		name: "store-born-without-floor",
		why:  "a new store forgets its floor: a store recreated after a loss accepts the tokens the old one had accepted (issue 9)",
		file: "fencelog/fencelog.go",
		old:  "\t\t\tstring(keyFloor):    u64(create.Floor),\n",
		new:  "\t\t\tstring(keyFloor):    u64(0),\n",
		pkgs: []string{"./fencelog", "./cmd/gateway"}, run: "TestStoreFloor|TestStoreRecreatedFromEtcd",
	},
	{
		name: "store-created-without-decision",
		why:  "fencelog creates a store for which nobody said which tokens are spent",
		file: "fencelog/fencelog.go",
		old:  "o.Create != nil && strings.TrimSpace(o.Create.Why) == \"\":",
		new:  "o.Create != nil && false:",
		pkgs: []string{"./fencelog"}, run: "TestStoreFloor",
	},
	{
		name: "floor-token-passes",
		why:  "a token equal to the floor passes (with a higher seq)",
		file: "fence/fence.go",
		old:  "\tif c.Fence.Token <= rules.Floor && current.Token <= rules.Floor {",
		new:  "\tif c.Fence.Token < rules.Floor && current.Token <= rules.Floor {",
		pkgs: []string{"./fence", "./fencelog"}, run: "TestDecideRules|TestStoreFloor",
	},
	{
		name: "no-token-jump-guard",
		why:  "max_token_jump is ignored: one forged token moves the fence to the end of the range",
		file: "fence/fence.go",
		old:  "\t\tif rules.MaxJump > 0 && c.Fence.Token-base > rules.MaxJump {",
		new:  "\t\tif false && c.Fence.Token-base > rules.MaxJump {",
		pkgs: []string{"./fencelog", "./cmd/gateway"}, run: "TestTokenJump|TestMaxTokenJump",
	},
	{
		name: "jump-guard-not-per-scope",
		why:  "a scope's max_token_jump never reaches its fence decision",
		file: "actuator/actuator.go",
		old:  "\t\tsc.rules = r\n",
		new:  "\t\t_ = r\n",
		pkgs: []string{"./cmd/gateway"}, run: "TestMaxTokenJump",
	},
	{
		name: "acl-controller-writes-all",
		why:  "the broker ACL of docs/security.md lets a controller publish on every topic",
		file: "docs/security.md",
		old:  "user ctl-a\n",
		new:  "user ctl-a\ntopic write #\n",
		pkgs: []string{"./service"}, run: "TestBrokerACL",
	},
	{
		name: "acl-anyone-writes-states",
		why:  "the broker ACL of docs/security.md lets every user publish every gateway's retained states",
		file: "docs/security.md",
		old:  "pattern write fencegate/%u/+/state\n",
		new:  "pattern write fencegate/+/+/state\n",
		pkgs: []string{"./service"}, run: "TestBrokerACL",
	},
	{
		name: "http-default-all-interfaces",
		why:  "without an http key the API listens on every address, not on loopback only",
		file: "config/config.go",
		old:  "const DefaultHTTP = \"127.0.0.1:8080\"",
		new:  "const DefaultHTTP = \":8080\"",
		pkgs: []string{"./service"}, run: "TestDefaultHTTPIsLoopbackOnly",
	},
	{
		name: "http-state-changing-route",
		why:  "the gateway's HTTP API gets a route that takes POST",
		file: "httpapi/httpapi.go",
		old:  "\tmux.Handle(\"GET /\", dashboard.Handler())\n",
		new:  "\tmux.Handle(\"GET /\", dashboard.Handler())\n\tmux.HandleFunc(\"POST /api/actuators/{name}\", func(http.ResponseWriter, *http.Request) {})\n",
		pkgs: []string{"./httpapi"}, run: "TestNoStateChangingEndpoint",
	},
	// Signed commands (issue 9, item 3).
	{
		name: "signature-not-verified",
		why:  "a signed command is taken without verifying its signature",
		file: "sign/sign.go",
		old:  "\tif !Verify(ctl.Key, p.GatewayID, c) {",
		new:  "\tif false && !Verify(ctl.Key, p.GatewayID, c) {",
		pkgs: []string{"./sign", "./actuator"}, run: "TestAuthorize|TestSignedCommands",
	},
	{
		name: "gateway-not-signed",
		why:  "the canonical encoding leaves the gateway id out: a signed command can be replayed on another gateway",
		file: "sign/sign.go",
		old:  "\tb = appendText(b, gatewayID)\n",
		new:  "",
		pkgs: []string{"./sign", "./actuator"}, run: "TestAuthorize|TestSignedCommands",
	},
	{
		name: "actuator-not-signed",
		why:  "the canonical encoding leaves the actuator out: a signed command can be replayed on another actuator",
		file: "sign/sign.go",
		old:  "\tb = appendText(b, c.Actuator)\n",
		new:  "",
		pkgs: []string{"./sign", "./actuator"}, run: "TestAuthorize|TestSignedCommands",
	},
	{
		name: "scope-not-checked",
		why:  "a controller commands scopes it was not given",
		file: "sign/sign.go",
		old:  "\tif !slices.Contains(ctl.Scopes, scope) {",
		new:  "\tif !slices.Contains(ctl.Scopes, scope) && false {",
		pkgs: []string{"./sign", "./actuator"}, run: "TestAuthorize|TestSignedCommands",
	},
	{
		name: "unsigned-accepted",
		why:  "an unsigned command passes where signed commands are required",
		file: "sign/sign.go",
		old:  "\t\tif p.Required[c.Actuator] {",
		new:  "\t\tif p.Required[c.Actuator] && false {",
		pkgs: []string{"./sign", "./actuator"}, run: "TestAuthorize|TestSignedCommands",
	},
	{
		name: "policy-not-wired",
		why:  "the gateway decides commands without its signature policy",
		file: "service/service.go",
		old:  "\t\tAuthorize:   authorize(cfg, log),\n",
		new:  "",
		pkgs: []string{"./cmd/gateway"}, run: "TestSignedCommandsEndToEnd",
	},
	{
		name: "pasted-key-quoted",
		why:  "a private key pasted into the configuration is quoted back by its syntax error",
		file: "config/config.go",
		old:  "\tif err := pemBlock(b); err != nil {",
		new:  "\tif err := pemBlock(b); err != nil && false {",
		pkgs: []string{"./config"}, run: "TestSigningConfigErrors",
	},
	{
		name: "tls-verification-off",
		why:  "the broker's certificate is not verified: any certificate, signed by any CA, is accepted",
		file: "mqttsec/files.go",
		old:  "c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName}",
		new:  "c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName, InsecureSkipVerify: true}",
		pkgs: []string{"./service"}, run: "TestBrokerTLS/wrong_CA",
	},
	{
		name: "tls-server-name-ignored",
		why:  "mqtt.tls.server_name is not checked: a certificate for another name is accepted",
		file: "mqttsec/files.go",
		old:  "c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName}",
		new:  "c := &tls.Config{MinVersion: tls.VersionTLS12}",
		pkgs: []string{"./service"}, run: "TestBrokerTLS/wrong_server_name",
	},
	{
		name: "password-not-sent",
		why:  "the gateway connects without the password it read",
		file: "mqttlink/link.go",
		old:  "\t\tSetPassword(l.opts.Password).\n",
		new:  "",
		pkgs: []string{"./service"}, run: "TestBrokerTLS/^good$",
	},
	{
		name: "password-logged",
		why:  "the gateway logs its broker password",
		file: "mqttlink/link.go",
		old:  `"password_from", l.opts.Settings.PasswordFrom)`,
		new:  `"password_from", l.opts.Settings.PasswordFrom, "password", l.opts.Password)`,
		pkgs: []string{"./cmd/gateway"}, run: "TestSecretsNeverShown",
	},
	// Reliability under faults (issue 10): the controller side.
	{
		name: "client-does-not-resend",
		why:  "package client never publishes an unanswered command again: commands published while the gateway was stopped cleanly are lost",
		file: "client/client.go",
		old:  "\tif cl.resend < 0 {\n",
		new:  "\tif true || cl.resend < 0 {\n",
		pkgs: []string{"./internal/torture"}, run: "^TestTorture$",
	},
	{
		name: "client-matches-id-only",
		why:  "client.Send takes an answer with its command's id for another actuator or pair",
		file: "client/client.go",
		old:  "w := cl.expect(c.ID, func(r fence.Result) bool { return Answers(c, r) }, false)",
		new:  "w := cl.expect(c.ID, nil, false)",
		pkgs: []string{"./client"}, run: "TestSendMatchesActuatorAndPair",
	},
	{
		name: "client-subscribes-once",
		why:  "package client does not subscribe again after a reconnect: after a broker restart it hears no answer, and its resends are never answered",
		file: "client/client.go",
		old:  "\t\tSetOnConnectHandler(func(c mqtt.Client) {\n",
		new:  "\t\tSetOnConnectHandler(func(c mqtt.Client) {\n\t\t\tcl.mu.Lock()\n\t\t\tseen := cl.status != \"\"\n\t\t\tcl.mu.Unlock()\n\t\t\tif seen {\n\t\t\t\treturn\n\t\t\t}\n",
		pkgs: []string{"./cmd/gateway"}, run: "TestResendAfterSessionLost",
	},
}

// The lock mutant needs handle to let the scope's lock go between the
// record and the drive (and take it back before it returns); this second
// edit does that.
var lockHelper = [2]string{
	"func (b *Bank) handle(o *output, c fence.Command) fence.Result {\n\tres := fence.Result{ID: c.ID, Actuator: c.Actuator, Command: c.Fence}\n\tadm, err := b.log.Admit(o.Scope, c, o.scope.rules, b.planner(o, c))",
	"func (b *Bank) handle(o *output, c fence.Command, early bool) fence.Result {\n\tres := fence.Result{ID: c.ID, Actuator: c.Actuator, Command: c.Fence}\n\tadm, err := b.log.Admit(o.Scope, c, o.scope.rules, b.planner(o, c))\n\tif early {\n\t\to.scope.unlock()\n\t\truntime.Gosched()\n\t\tdefer o.scope.lock(context.Background())\n\t}",
}

func TestMutantsAreCaught(t *testing.T) {
	if os.Getenv("FENCEGATE_MUTANTS") != "1" {
		t.Skip("set FENCEGATE_MUTANTS=1 (make mutants) to run the mutation tests")
	}
	root, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Fatalf("git: %v", err)
	}
	top := strings.TrimSpace(string(root))
	for _, m := range mutants {
		t.Run(m.name, func(t *testing.T) {
			dir := t.TempDir()
			extract(t, top, dir)
			apply(t, dir, m.file, m.old, m.new)
			if m.name == "lock-released-before-drive" {
				apply(t, dir, m.file, lockHelper[0], lockHelper[1])
				apply(t, dir, m.file, "\t\"sync\"\n", "\t\"runtime\"\n\t\"sync\"\n")
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			args := append([]string{"test", "-count=1", "-race", "-run", m.run}, m.pkgs...)
			cmd := exec.CommandContext(ctx, "go", args...)
			cmd.Dir = dir
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Errorf("mutant %s (%s) survived: go %s passed\n%s", m.name, m.why, strings.Join(args, " "), out)
				return
			}
			if bytes.Contains(out, []byte("[build failed]")) || bytes.Contains(out, []byte("setup failed")) {
				t.Errorf("mutant %s does not compile; fix the mutant:\n%s", m.name, out)
				return
			}
			t.Logf("caught: %s (%s)", m.name, m.why)
		})
	}
}

func extract(t *testing.T, top, dir string) {
	t.Helper()
	cmd := exec.Command("git", "archive", "HEAD")
	cmd.Dir = top
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git archive: %v", err)
	}
	tr := tar.NewReader(bytes.NewReader(out))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, h.Name)
		switch h.Typeflag {
		case tar.TypeDir:
			os.MkdirAll(p, 0o755)
		case tar.TypeReg:
			os.MkdirAll(filepath.Dir(p), 0o755)
			b, _ := io.ReadAll(tr)
			if err := os.WriteFile(p, b, os.FileMode(h.Mode)); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func apply(t *testing.T, dir, file, old, new string) {
	t.Helper()
	p := filepath.Join(dir, file)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), old); n != 1 {
		t.Fatalf("mutant edit of %s: the original text occurs %d times (want once); update the mutant to the code:\n%s", file, n, old)
	}
	if err := os.WriteFile(p, []byte(strings.Replace(string(b), old, new, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
}
