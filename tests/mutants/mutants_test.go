// Package mutants checks that the test suite catches deliberately broken
// variants of the safety core. Each mutant edits one place (or a few) in a
// copy of the committed tree (git archive HEAD) and runs the tests that
// must catch it, several times, each run in a process of its own: a mutant
// is caught only if its tests fail on every run. A mutant whose tests pass
// is a hole in the suite; one caught only sometimes is a test that depends
// on timing, where a hook must force the interleaving instead.
//
// It is slow (a build per mutant and package, and a test run per run), so
// it runs only with FENCEGATE_MUTANTS=1: `make mutants`, which CI runs. It
// prints each mutant's caught/run count and time, and the total. Set
// FENCEGATE_MUTANTS_ONLY to a regular expression to run the mutants whose
// names match, FENCEGATE_MUTANT_RUNS to change the default number of
// runs, and FENCEGATE_MUTANT_SHOW=1 to see what the tests printed when they
// failed (to find a test that fails slowly: it waited for a timeout).
package mutants

import (
	"archive/tar"
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// A mutant is one deliberate break of the code and the tests that must
// catch it. Entries set name, why, file, old, new, pkgs and run; runs and
// more have defaults (zero values), so that a plain entry needs neither.
type mutant struct {
	name string
	why  string
	file string
	old  string // must occur exactly once in file
	new  string
	pkgs []string // test packages and -run pattern that must fail
	run  string
	// runs is how many times the tests run, each in a process of its own;
	// every run must fail. 0 means defaultRuns. A mutant that a race
	// window exposes (a lock) runs more often, to show that a hook, not
	// timing, makes its test fail.
	runs int
	// more are further edits, applied after the first, in any file.
	more []edit
	// env is added to the tests' environment: it narrows a slow test to
	// the part that catches the mutant.
	env []string
}

// An edit replaces old, which must occur exactly once in file, with new.
type edit struct{ file, old, new string }

// defaultRuns is how many times a mutant's tests run unless it says.
const defaultRuns = 3

var mutants = []mutant{
	{
		name: "no-fence-check",
		why:  "every command passes the fence (M1)",
		file: "fence/fence.go",
		old:  "\tif current.Less(c.Fence) {\n\t\tbase := max(current.Token, rules.Floor)",
		new:  "\tif true || current.Less(c.Fence) {\n\t\tbase := max(current.Token, rules.Floor)",
		pkgs: []string{"./actuator"}, run: "TestPausedControllerInterleavings",
	},
	{
		name: "equal-pair-passes",
		why:  "a pair equal to the fence passes (>= instead of >)",
		file: "fence/fence.go",
		old:  "\tif current.Less(c.Fence) {\n\t\tbase := max(current.Token, rules.Floor)",
		new:  "\tif current.Less(c.Fence) || current == c.Fence {\n\t\tbase := max(current.Token, rules.Floor)",
		pkgs: []string{"./fence", "./fencelog"}, run: "TestDecide|TestAdmitSequence",
	},
	{
		name: "fence-not-persisted",
		why:  "the new fence is decided but never written (M2)",
		file: "fencelog/admit.go",
		old:  "\t\tif wrote {\n\t\t\tif err := l.writeScope(tx, scope, rec); err != nil {",
		new:  "\t\tif false && wrote {\n\t\t\tif err := l.writeScope(tx, scope, rec); err != nil {",
		pkgs: []string{"./fencelog"}, run: "TestPersistsAcrossReopen",
	},
	{
		name: "drive-before-record",
		why:  "the output is driven before the fence is recorded (M3)",
		file: "actuator/command.go",
		old:  "\tadms, err := b.store.AdmitBatch(o.Scope, o.guard.rules, reqs)\n",
		new:  "\tfor _, c := range cmds {\n\t\tif c.State != fence.StateNone {\n\t\t\to.pin.Out(o.level(c.State))\n\t\t}\n\t}\n\tadms, err := b.store.AdmitBatch(o.Scope, o.guard.rules, reqs)\n",
		pkgs: []string{"./actuator"}, run: "TestHandle|TestRecordFailureNeverDrives|TestPausedControllerInterleavings",
	},
	{
		name: "fence-per-actuator",
		why:  "actuators of one scope get a fence each instead of sharing their scope's (M4)",
		file: "actuator/actuator.go",
		old:  "\t\tboot, err := ParseBoot(string(s.Boot))\n",
		new:  "\t\ts.Scope = s.Name\n\t\tboot, err := ParseBoot(string(s.Boot))\n",
		pkgs: []string{"./actuator"}, run: "TestPausedControllerInterleavings|TestLockHeldFromRecordToDrive",
		runs: 10,
	},
	{
		name: "lock-released-before-drive",
		why:  "the scope lock is released between the record and the drive",
		file: "actuator/command.go",
		// handle lets the scope's lock go between the record and the
		// drive, and takes it back before it returns.
		old:  "\tadms, err := b.store.AdmitBatch(o.Scope, o.guard.rules, reqs)\n",
		new:  "\tadms, err := b.store.AdmitBatch(o.Scope, o.guard.rules, reqs)\n\to.guard.unlock()\n\truntime.Gosched()\n\tdefer o.guard.lock(context.Background())\n",
		more: []edit{{"actuator/command.go", "\t\"slices\"\n", "\t\"runtime\"\n\t\"slices\"\n"}},
		pkgs: []string{"./actuator"}, run: "TestLockHeldFromRecordToDrive",
		runs: 10,
	},
	{
		name: "interlock-batched",
		why:  "an interlocked output's queued commands are planned together, each from the pins as they were before the batch, not after the drives of the commands before it",
		file: "actuator/command.go",
		old:  "\tif !o.oneByOne() {\n\t\tdecided = b.handle(o, pick(cmds, todo))",
		new:  "\tif true || !o.oneByOne() {\n\t\tdecided = b.handle(o, pick(cmds, todo))",
		pkgs: []string{"./actuator"}, run: "TestHandleBatchIsHandleInSequence",
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
		file: "actuator/command.go",
		old:  "\tcase fence.Stale:\n\t\tres.Error = adm.Error",
		new:  "\tcase fence.Stale:\n\t\tres.Error = adm.Error\n\t\tres.Fence = fence.Fence{}",
		pkgs: []string{"./actuator"}, run: "TestHandle",
	},
	{
		name: "interlock-ignored",
		why:  "a command turns an interlocked output on while another member is on",
		file: "actuator/plan.go",
		old:  "\tif o.lock == nil || c.State != fence.StateOn {\n\t\treturn nil\n\t}",
		new:  "\tif true || o.lock == nil || c.State != fence.StateOn {\n\t\treturn nil\n\t}",
		pkgs: []string{"./actuator"}, run: "TestInterlock",
	},
	{
		name: "make-before-break",
		why:  "break-before-make switches the new member on before the others off",
		file: "fence/fence.go",
		old:  "\treturn Effect{Sets: append(sets, Set{Actuator: c.Actuator, State: StateOn, Duty: c.Duty}),",
		new:  "\treturn Effect{Sets: append([]Set{{Actuator: c.Actuator, State: StateOn, Duty: c.Duty}}, sets...),",
		pkgs: []string{"./actuator"}, run: "TestInterlockBreakBeforeMake",
	},
	{
		name: "window-never-trimmed",
		why:  "a scope's record keeps every command ever applied: each commit rewrites a record that grows without bound",
		file: "fence/fence.go",
		old:  "\treturn window[max(0, len(window)-Window):len(window):len(window)]",
		new:  "\treturn window[:len(window):len(window)]",
		pkgs: []string{"./fencelog"}, run: "TestAdmitBatchIsAdmitInSequence",
	},
	{
		name: "refusal-keeps-old-fence",
		why:  "a command an interlock refused does not raise the fence, so the displaced holder keeps acting",
		file: "fencelog/admit.go",
		old:  "\t\t\t\trec.Fence = c.Fence\n\t\t\t\tif window == nil {",
		new:  "\t\t\t\tif eff.Refusal == nil {\n\t\t\t\t\trec.Fence = c.Fence\n\t\t\t\t}\n\t\t\t\tif window == nil {",
		pkgs: []string{"./actuator"}, run: "TestInterlockRejects",
	},
	{
		name: "no-dead-time",
		why:  "an interlocked output comes on without waiting out the dead time",
		file: "actuator/guard.go",
		old:  "for wait := until.Sub(b.clock.Now()); wait > 0; wait = until.Sub(b.clock.Now()) {",
		new:  "for wait := time.Duration(0); wait > 0; wait = until.Sub(b.clock.Now()) {",
		pkgs: []string{"./actuator"}, run: "TestInterlockBreakBeforeMake|TestInterlockBoot",
	},
	{
		name: "boot-levels-before-binding",
		why:  "the lines are taken over at levels decided before the store bound moved actuators to their scopes",
		file: "actuator/boot.go",
		old:  "\tmoved, err := b.store.Bind(scopes)\n\tif err != nil {\n\t\treturn fmt.Errorf(\"actuator: %w\", err)\n\t}",
		new:  "\tdefer b.store.Bind(scopes)\n\tvar moved []string",
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
		name: "conflict-untold",
		why:  "a process that found another serving its gateway id, its own connection taken over, stops without telling it: the other sees it end and serves with its own store",
		file: "mqttlink/tell.go",
		old:  "\terr := g.tellAlone(payload, other.Instance)\n",
		new:  "\terr := error(nil)\n",
		pkgs: []string{"./mqttlink"}, run: "TestConflictToldWithoutConnection",
	},
	{
		name: "conflict-word-overwritten",
		why:  "the claim that tells the other process of the conflict is not said again when the other's own claim, published just after it, replaced it on the broker",
		file: "mqttlink/tell.go",
		old:  "\t\tcase cl.Instance == other && watched != nil && said < 5:",
		new:  "\t\tcase false && cl.Instance == other && watched != nil && said < 5:",
		pkgs: []string{"./mqttlink"}, run: "TestConflictSaidAgainOverTheOthersClaim",
	},
	{
		name: "living-claims-again-waited-for",
		why:  "a running process with the gateway id that claims it again on a later connection is still waited for as one on its way out: two gateways whose answers the broker does not deliver wait for each other for ever",
		file: "mqttlink/instance.go",
		old:  "return p.Instance == c.Instance && p.Connection < c.Connection",
		new:  "return false && p.Instance == c.Instance && p.Connection < c.Connection",
		pkgs: []string{"./mqttlink"}, run: "TestLivingThatClaimsAgainIsAConflict",
	},
	{
		name: "living-end-unconfirmed",
		why:  "a gateway that waited for a running process with its id to end takes commands without reading the claim it left: the conflict it said there, its live message lost, is missed",
		file: "mqttlink/instance.go",
		old:  "\tif settle || waited {",
		new:  "\tif settle || (waited && false) {",
		pkgs: []string{"./mqttlink"}, run: "TestConflictFoundAfterTheOtherEnded",
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
		why:  "a new store forgets its floor: a store recreated after a loss accepts the tokens the old one had accepted",
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
	// Signed commands.
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
		old:  "\t\tAuthorize:   authorize(g.cfg, g.log),\n",
		new:  "",
		pkgs: []string{"./cmd/gateway"}, run: "TestSignedCommandsEndToEnd",
	},
	{
		name: "trip-read-after-takeover",
		why:  "the trip inputs are not read before the outputs are taken over: a scope tripped at start has its outputs taken over as the boot rule says, on for a moment",
		file: "service/service.go",
		old:  "\t\tg.tripAtStart,   // a tripped scope is taken over at its safe state\n",
		new:  "",
		pkgs: []string{"./service"}, run: "TestTripReadBeforeTakeOver",
	},
	{
		name: "pasted-key-quoted",
		why:  "a private key pasted into the configuration is quoted back by its syntax error",
		file: "config/load.go",
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
		file: "mqttlink/connect.go",
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
	// Operability.
	{
		name: "watchdog-pings-when-stuck",
		why:  "the gateway pings systemd's watchdog while its decision path is stuck: a hung drive or store is never restarted",
		file: "supervise/supervise.go",
		old:  "\t\tcase why == \"\":\n",
		new:  "\t\tcase true:\n",
		pkgs: []string{"./cmd/gateway"}, run: "TestSystemdNotify/^stuck_scope$",
	},
	{
		name: "ready-without-broker",
		why:  "GET /readyz says ready while the broker is not connected",
		file: "httpapi/httpapi.go",
		old:  "OK: b.Connected && b.Subscribed,",
		new:  "OK: true,",
		pkgs: []string{"./cmd/gateway"}, run: "TestReadyzFollowsTheBroker",
	},
	{
		name: "ha-switch",
		why:  "Home Assistant's discovery offers each actuator as a switch whose command topic is the gateway's: commands without lease or token",
		file: "hass/hass.go",
		old:  "\t\t\t\"p\":              \"binary_sensor\",\n",
		new:  "\t\t\t\"p\":              \"switch\",\n\t\t\t\"command_topic\": o.Topics.Set(a),\n",
		pkgs: []string{"./hass"}, run: "TestDiscoveryPayload",
	},
	{
		name: "ha-birth-ignored",
		why:  "the gateway does not answer Home Assistant's birth message: after Home Assistant restarts without the retained discovery, the actuators are gone from it",
		file: "mqttlink/connect.go",
		old:  "\t\t\tif string(m.Payload()) == a.BirthPayload {\n",
		new:  "\t\t\tif false && string(m.Payload()) == a.BirthPayload {\n",
		pkgs: []string{"./cmd/gateway"}, run: "TestHomeAssistantDiscovery",
	},
	{
		name: "bridge-retries-with-lost-lease",
		why:  "on a stale answer the Home Assistant bridge sends again under its old lease instead of acquiring the scope again: Home Assistant's command is refused for good",
		file: "habridge/habridge.go",
		old:  "\t\t\tsc.l.Release(context.Background())\n\t\t\tsc.l = nil\n\t\t\tcontinue\n",
		new:  "\t\t\tcontinue\n",
		pkgs: []string{"./cmd/gateway"}, run: "TestHABridge",
	},
	// Set-points.
	{
		name: "setpoint-range-unchecked",
		why:  "a set-point outside its output's min and max is recorded and driven: a fan below its stall point, a valve past its limit",
		file: "actuator/setpoint.go",
		old:  "\tif c.Duty < o.Min || c.Duty > o.max() {\n",
		new:  "\tif false && (c.Duty < o.Min || c.Duty > o.max()) {\n",
		pkgs: []string{"./actuator"}, run: "TestSetpointFenced",
	},
	{
		name: "setpoint-ramp-unchecked",
		why:  "max_rate is not enforced: a set-point jumps as far as a command asks, however fast",
		file: "fence/duty.go",
		old:  "\tif float64(step) <= allowed {\n",
		new:  "\tif true || float64(step) <= allowed {\n",
		pkgs: []string{"./fence", "./actuator"}, run: "TestRampEffect|TestSetpointFenced",
	},
	{
		name: "setpoint-signed-as-state",
		why:  "a set-point signs the state on or off, not duty: a signature of a switch's on could pass for a set-point, and no other client's signature verifies",
		file: "sign/sign.go",
		old:  "\t\tstate = \"duty\"\n",
		new:  "",
		pkgs: []string{"./sign"}, run: "TestVectors",
	},
	{
		name: "setpoint-duplicate-ignores-duty",
		why:  "a command with the pair and id of an applied set-point but another duty is answered duplicate: the controller is told its set-point holds when another was recorded",
		file: "fence/fence.go",
		old:  " || a.Setpoint != c.Setpoint || a.Duty != c.Duty || a.Frequency != c.Frequency {",
		new:  " || a.Frequency != c.Frequency {",
		pkgs: []string{"./actuator"}, run: "TestSetpointFenced",
	},
	{
		name: "setpoint-ramp-batched",
		why:  "a ramped set-point's queued commands are planned together, each from the time of the drive before the batch: two steps in one batch move it twice as far as max_rate allows",
		file: "actuator/command.go",
		old:  "\treturn o.lock != nil || (o.Kind == KindSetpoint && o.MaxRate > 0)\n",
		new:  "\treturn o.lock != nil\n",
		pkgs: []string{"./actuator"}, run: "TestSetpointFenced",
	},
	{
		name: "setpoint-driven-full",
		why:  "a set-point output is driven to 100 % whatever set-point was recorded",
		file: "actuator/setpoint.go",
		old:  "\t\td = cur.Duty\n",
		new:  "\t\td = fence.FullDuty\n",
		pkgs: []string{"./actuator"}, run: "TestSetpointFenced",
	},
	// Pulses.
	{
		name: "pulse-resumed-after-crash",
		why:  "a pulse found running at start is not ended: the boot rule drives the recorded on again, and the door opens a second time after a crash",
		file: "actuator/boot.go",
		old:  "\t\t\tif p := rec.Output(o.Name).Pulse; p != nil && p.Status == fence.PulseRunning {\n",
		new:  "\t\t\tif p := rec.Output(o.Name).Pulse; false && p != nil && p.Status == fence.PulseRunning {\n",
		pkgs: []string{"./actuator", "./cmd/gateway"}, run: "TestPulseInterruptedByRestart|TestPulseKilledMidPulse",
	},
	{
		name: "pulse-while-pulsing",
		why:  "a pulse that arrives while one runs is carried out (its width restarts the running one), not refused busy",
		file: "actuator/plan.go",
		old:  "return fence.PulseEffect(c, rec.Output(o.Name).State == fence.StateOn)",
		new:  "return fence.PulseEffect(c, false)",
		pkgs: []string{"./actuator"}, run: "TestPulseBusy",
	},
	{
		name: "pulse-end-not-recorded",
		why:  "the end of a pulse is driven but not recorded: the record says running for ever, a redelivery is told running, and every later pulse is refused busy",
		file: "actuator/pulse.go",
		old:  "\t\tok, err = b.store.Write(endOf(o, p, rec.Output(o.Name).Holder, status, why))\n",
		new:  "",
		pkgs: []string{"./actuator"}, run: "^TestPulse$",
	},
	// Safe states.
	{
		name: "stale-keeps-scope-alive",
		why:  "any decided command counts as a sign of life for the dead-man: a vanished holder's stale commands (or anyone's) keep its scope out of the safe state",
		file: "actuator/command.go",
		old:  "\t\tif adms[i].Outcome == fence.Applied {\n",
		new:  "\t\tif true {\n",
		pkgs: []string{"./actuator"}, run: "^TestDeadman$",
	},
	{
		name: "max-on-ignored",
		why:  "an output's max_on is never counted: a heater left on by a vanished controller stays on",
		file: "actuator/liveness.go",
		old:  "\tif o.MaxOn <= 0 {\n\t\treturn // nothing to count (and a pulse's end drives without the lock)\n",
		new:  "\tif true {\n\t\treturn // nothing to count (and a pulse's end drives without the lock)\n",
		pkgs: []string{"./actuator"}, run: "^TestMaxOn$",
	},
	// Outputs on any GPIO chip.
	{
		name: "chip-line-opened-twice",
		why:  "one line of an expander named twice (by offset and by name) is opened as two outputs: two actuators drive one relay",
		file: "boards/siminputs.go",
		old:  "\t\tif _, dup := outputs[key]; dup {\n",
		new:  "\t\tif _, dup := outputs[key]; false && dup {\n",
		pkgs: []string{"./boards"}, run: "TestSimChipLines",
	},
	{
		name: "power-on-warning-silent",
		why:  "gateway check says nothing of a relay on a PCF857x line that is energised from power-on until the gateway starts",
		file: "boards/pinmap/pinmap.go",
		old:  "\t\tif !activeLow {\n",
		new:  "\t\tif false {\n",
		pkgs: []string{"./boards", "./boards/pinmap"}, run: "TestCheckPowerOnWarnings|TestPowerOnWarning",
	},
	// Inputs.
	{
		name: "requires-ignored",
		why:  "an output that requires an input's level comes on without it: the gate closes on an open door",
		file: "actuator/plan.go",
		old:  "\tif c.State == fence.StateOn && o.Requires != nil {\n",
		new:  "\tif false && c.State == fence.StateOn && o.Requires != nil {\n",
		pkgs: []string{"./cmd/gateway"}, run: "TestInputsVetoAndTrip",
	},
	{
		name: "trip-not-latched",
		why:  "a tripped scope takes an on command: the heater that overheated comes back on without a reset",
		file: "actuator/plan.go",
		old:  "\t\t\tcase c.State != fence.StateNone && !isAt(fence.Output{State: c.State, Duty: c.Duty, Frequency: c.Frequency}, o.guard.safeSet(o)) && o.Kind != KindPulse, c.Pulse > 0:\n",
		new:  "\t\t\tcase false:\n",
		pkgs: []string{"./cmd/gateway"}, run: "TestInputsVetoAndTrip",
	},
	// Group commit.
	{
		name: "batch-done-before-commit",
		why:  "the writers batched behind a commit's leader learn that their writes are done before the commit: their outputs may be driven on fences a power cut loses",
		file: "fencelog/commit.go",
		old:  "\tfailed := false\n\tstart := time.Now()\n",
		new:  "\tfor _, w := range batch[1:] {\n\t\tw.done <- nil\n\t}\n\tfailed := false\n\tstart := time.Now()\n",
		pkgs: []string{"./fencelog"}, run: "TestNoWriteReturnsBeforeItsCommit",
	},
	{
		name: "no-group-commit",
		why:  "every write commits alone: each applied command costs two syncs, however many wait",
		file: "fencelog/commit.go",
		old:  "\tbatch := g.queue\n\tg.queue = nil\n",
		new:  "\tbatch := g.queue[:1]\n\tg.queue = g.queue[1:]\n",
		pkgs: []string{"./fencelog"}, run: "TestGroupCommit",
	},
	{
		name: "batch-fails-together",
		why:  "one failing write fails every write of its batch",
		file: "fencelog/commit.go",
		old:  "\tif failed && len(batch) > 1 {\n",
		new:  "\tif false && failed && len(batch) > 1 {\n",
		pkgs: []string{"./fencelog"}, run: "TestFailedWriteFailsAlone",
	},
	{
		name: "batch-reads-committed-record",
		why:  "a write decides on the scope's record as the last commit left it, not as an earlier write of its own batch did: two commands of one scope in one batch can both be applied, and the fence can go back",
		file: "fencelog/record.go",
		old:  "\trec, ok := l.staged[scope]\n",
		new:  "\trec, ok := l.staged[scope]\n\tok = false\n",
		pkgs: []string{"./fencelog"}, run: "TestBatchSeesItsOwnWrites",
	},
	// Durability and disk faults.
	{
		name: "bbolt-nosync",
		why:  "bbolt's NoSync: commits are not fsynced, and outputs move on fences that a power cut loses",
		file: "fencelog/fencelog.go",
		old:  "&bolt.Options{Timeout: o.Timeout, ReadOnly: o.ReadOnly}",
		new:  "&bolt.Options{Timeout: o.Timeout, ReadOnly: o.ReadOnly, NoSync: true}",
		pkgs: []string{"./cmd/gateway"}, run: "TestFsyncBeforeDrive",
	},
	{
		name: "drive-before-record-outside",
		why:  "the output is driven before the fence is recorded, seen from outside the process (strace)",
		file: "actuator/command.go",
		old:  "\tadms, err := b.store.AdmitBatch(o.Scope, o.guard.rules, reqs)\n",
		new:  "\tfor _, c := range cmds {\n\t\tif c.State != fence.StateNone {\n\t\t\to.pin.Out(o.level(c.State))\n\t\t}\n\t}\n\tadms, err := b.store.AdmitBatch(o.Scope, o.guard.rules, reqs)\n",
		pkgs: []string{"./cmd/gateway"}, run: "TestFsyncBeforeDrive",
	},
	{
		name: "decision-outside-transaction",
		why:  "Admit applies what the read-only decision found, not what the write transaction sees: a fence raised in between is overwritten",
		file: "fencelog/admit.go",
		old:  "\t\t\td := fence.Decide(rec.Fence, rec.Recent, c, rules)\n\t\t\tvar eff fence.Effect",
		new:  "\t\t\td := first[i]\n\t\t\tvar eff fence.Effect",
		pkgs: []string{"./fencelog"}, run: "TestDecisionInsideTransaction",
	},
	{
		name: "pulse-end-unconditional",
		why:  "the end of a pulse is recorded whether or not that pulse still runs: a late end marks another pulse, or one that ended already, done",
		file: "fencelog/states.go",
		old:  "\t\t\tif o := rec.Outputs[p.Actuator]; !runs(o.Pulse, p.Pulse) {\n",
		new:  "\t\t\tif o := rec.Outputs[p.Actuator]; o.Pulse == nil {\n",
		pkgs: []string{"./fencelog"}, run: "TestWritePulseEnd",
	},
	{
		name: "input-decided-outside-transaction",
		why:  "an input's level is recorded as the read-only look found it, not as the write transaction does: a change recorded in between is lost from the count",
		file: "fencelog/states.go",
		old:  "\t\tcur, found, err := readInput(b, name)\n",
		new:  "\t\t_, _, err = readInput(b, name)\n",
		pkgs: []string{"./fencelog"}, run: "TestRecordInputDecidedInTransaction",
	},
	{
		name: "no-directory-fsync",
		why:  "a new store's directory is not fsynced: a power cut after init can leave a written store with no name",
		file: "fencelog/fencelog.go",
		old:  "\treturn syncDir(filepath.Dir(path))\n}",
		new:  "\treturn nil\n}",
		pkgs: []string{"./cmd/gateway"}, run: "TestStoreCreationSyncsDirectory",
	},
	{
		name: "broken-store-keeps-running",
		why:  "after a failed commit the gateway runs on instead of stopping for its supervisor to reopen the store",
		file: "service/service.go",
		old:  "\"err\", g.store.Err())\n\t\t\tcancel()",
		new:  "\"err\", g.store.Err())",
		pkgs: []string{"./cmd/gateway"}, run: "TestStoreGoneWhileRunning/^deleted$",
	},
	{
		name: "audit-not-flushed-on-close",
		why:  "Close drops the buffered audit entries of stale and duplicate decisions",
		file: "fencelog/fencelog.go",
		old:  "\t\t\tflushErr = l.flush()\n",
		new:  "",
		pkgs: []string{"./fencelog"}, run: "TestCloseFlushesAudit",
	},
	{
		name: "store-silently-created",
		why:  "gateway run creates a missing store (floor 0) instead of refusing: every old token passes again",
		file: "service/service.go",
		old:  "\tif g.opts.Init {\n",
		new:  "\tif true {\n",
		pkgs: []string{"./service", "./cmd/gateway"}, run: "TestStoreNeverSilentlyCreated|TestCLIErrors",
	},
	{
		name: "store-gone-unnoticed",
		why:  "a store deleted or replaced while open takes commits into a file nobody can open again, and answers them applied",
		file: "fencelog/commit.go",
		old:  "\t\terr = l.sameFile()\n",
		new:  "\t\terr = nil\n",
		pkgs: []string{"./fencelog", "./cmd/gateway"}, run: "TestStoreGone",
	},
	{
		name: "other-gateways-store",
		why:  "a store recorded as another gateway's is taken over",
		file: "fencelog/fencelog.go",
		old:  "\tif owner == \"\" || want == \"\" || owner == want {",
		new:  "\tif true {",
		pkgs: []string{"./fencelog", "./cmd/gateway"}, run: "TestStoreGateway|TestStoreRefusedAtStart/^another",
	},
	{
		name: "damaged-pages-unchecked",
		why:  "a store with damaged pages is opened without reading them: the gateway crashes later, or decides on garbage",
		file: "fencelog/fencelog.go",
		old:  "\t\tif err := walk(db, path); err != nil {",
		new:  "\t\tif err := error(nil); err != nil {",
		pkgs: []string{"./fencelog", "./cmd/gateway"}, run: "TestOpenDamagedPages|TestStoreRefusedAtStart",
	},
	// Hostile input, answers that say what the output is, locks forced by hooks.
	{
		name: "lock-per-actuator",
		why:  "the actuators of a scope share its fence but each has a lock of its own",
		file: "actuator/actuator.go",
		old:  "\t\tsc := byScope[s.Scope]\n\t\tif sc == nil {\n\t\t\tsc = &guard{name: s.Scope, sem: make(chan struct{}, 1)}\n\t\t\tbyScope[s.Scope] = sc\n",
		new:  "\t\tsc := byScope[s.Name]\n\t\tif sc == nil {\n\t\t\tsc = &guard{name: s.Scope, sem: make(chan struct{}, 1)}\n\t\t\tbyScope[s.Name] = sc\n",
		pkgs: []string{"./actuator"}, run: "TestLockHeldFromRecordToDrive",
		runs: 10,
	},
	{
		name: "reconcile-skipped-at-start",
		why:  "Start does not drive the outputs to their recorded (or boot) states",
		file: "actuator/boot.go",
		old:  "\t\t\tif err := o.pin.Out(o.level(pass)); err != nil {\n",
		new:  "\t\t\tif err := error(nil); err != nil {\n",
		pkgs: []string{"./actuator"}, run: "TestReconcile",
	},
	{
		name: "scope-move-without-fence",
		why:  "an actuator moved to another scope does not bring its old scope's fence along (fencelog.Bind)",
		file: "fencelog/bind.go",
		old:  "\t\t\t\tif to.Fence.Less(from.Fence) {\n\t\t\t\t\tto.Fence = from.Fence\n\t\t\t\t}\n",
		new:  "",
		pkgs: []string{"./fencelog"}, run: "TestBindCarriesFences",
	},
	{
		name: "drive-failure-answered-applied",
		why:  "a command whose drive failed is answered applied",
		file: "actuator/command.go",
		old:  "\t\t\t\tres.Outcome = fence.Failed\n\t\t\t\tres.Error = fmt.Sprintf(\"fence %s recorded but",
		new:  "\t\t\t\tres.Error = fmt.Sprintf(\"fence %s recorded but",
		pkgs: []string{"./actuator"}, run: "TestDriveFailure",
	},
	{
		name: "token-bound-removed",
		why:  "the decoder accepts a token (or seq) above 2^63-1",
		file: "wire/command.go",
		old:  "\tif err != nil || v > hi {\n",
		new:  "\tif err != nil {\n",
		pkgs: []string{"./wire"}, run: "TestDecodeCommandRejects|FuzzDecodeCommand",
	},
	{
		name: "unanswerable-topic-parsed",
		why:  "a command topic whose answer cannot be published (wildcard, too long) names an actuator",
		file: "wire/wire.go",
		old:  "\tif !ok || strings.Contains(leaf, \"/\") || !t.answerable(name) {\n",
		new:  "\tif !ok || strings.Contains(leaf, \"/\") || name == \"\" {\n",
		pkgs: []string{"./wire"}, run: "TestTopicsRefuseUnanswerableNames|FuzzTopics",
	},
	{
		name: "float-for-whole-number",
		why:  "the configuration takes 1.5 or 1e3 for a whole number (yaml.v3 truncates it)",
		file: "config/errors.go",
		old:  "err == nil && (!wholeNumber(t) || v.ShortTag() == \"!!int\")",
		new:  "err == nil",
		pkgs: []string{"./config"}, run: "TestParseHostileInput",
	},
	{
		name: "duplicate-answers-original-state",
		why:  "a duplicate answer repeats the state its original set, not the output's state now",
		file: "actuator/command.go",
		old:  "\t\torig := adm.Original\n\t\tres.Fence = orig.Fence\n",
		new:  "\t\torig := adm.Original\n\t\tres.Fence = orig.Fence\n\t\tif orig.State != fence.StateNone {\n\t\t\tres.State = orig.State\n\t\t}\n",
		pkgs: []string{"./actuator"}, run: "TestDuplicateSaysTheOutputNow|TestHandle",
	},
	{
		name: "answer-without-actual",
		why:  "an answer does not say that the output reads back otherwise than recorded",
		file: "actuator/command.go",
		old:  "\tcase high != o.level(res.State):\n",
		new:  "\tcase false:\n",
		pkgs: []string{"./actuator"}, run: "TestDriveFailure",
	},
	{
		name: "client-ignores-output",
		why:  "client.Send reports success for a duplicate whose output is not as the command asked",
		file: "client/output.go",
		old:  "\tif err != nil || c.State == fence.StateNone {\n",
		new:  "\tif true || c.State == fence.StateNone {\n",
		pkgs: []string{"./client"}, run: "TestSendChecksTheOutput",
	},
	{
		name: "dead-time-on-wall-clock",
		why:  "an interlock's dead time is counted on the wall clock, so a clock jump skips it or stretches it to a day",
		file: "actuator/guard.go",
		old:  "\t\to.lock.lastOff = b.clock.Now()\n",
		new:  "\t\to.lock.lastOff = b.clock.Now().Round(0)\n",
		pkgs: []string{"./piemu"}, run: "TestPiEmu",
		env: []string{"FENCEGATE_PIEMU_RUN=^TestDecisionsIgnoreClockJumps$"},
	},
	{
		name: "acquire-gives-up-when-waiting-lease-expires",
		why:  "lease.Acquire fails when its waiting key's lease ran out (a failover longer than the TTL) instead of waiting again",
		file: "lease/lease.go",
		old:  "if expired && ctx.Err() == nil {",
		new:  "if false && expired {",
		pkgs: []string{"./lease"}, run: "TestAcquireWaitsAgainWhenItsSessionExpires",
	},
	{
		name: "acquire-waits-on-after-session-ends",
		why:  "lease.Acquire goes on waiting when its waiting session ends, keyless and out of the queue, until the holder lets go",
		file: "lease/lease.go",
		old:  "err = m.Lock(lctx)",
		new:  "err = m.Lock(ctx)",
		pkgs: []string{"./lease"}, run: "TestAcquireWaitsAgainWhenItsSessionExpires",
	},
	{
		name: "checkfence-ignores-held-lock",
		why:  "Lease.CheckFence says nothing when a restored etcd grants the fence's token again (only a fence above the revision is reported)",
		file: "lease/lease.go",
		old:  "if err := CheckFence(ctx, cli, fence); err != nil || fence < l.token {",
		new:  "if err := CheckFence(ctx, cli, fence); err != nil || fence < l.token || true {",
		pkgs: []string{"./cmd/gateway"}, run: "TestEtcdRestoredFromSnapshot/^one_grant_after_the_backup$",
	},
	// The MQTT link: each caught by a test whose
	// interleaving hooks force.
	{
		name: "retained-check-removed",
		why:  "a command delivered with the retain flag (a stored retained message) is decided",
		file: "mqttlink/serve.go",
		old:  "\t\tcase ms[i].Retained():\n",
		new:  "\t\tcase false && ms[i].Retained():\n",
		pkgs: []string{"./mqttlink"}, run: "TestRetainedCommandRefused",
	},
	{
		name: "ack-before-decide",
		why:  "a command is acknowledged when the worker takes it, before it is decided: a stop or crash loses it",
		file: "mqttlink/serve.go",
		old:  "\tl.serving.RLock()\n\tdefer l.serving.RUnlock()\n\tif ctx.Err() != nil {\n\t\treturn // stopping: not decided\n",
		new:  "\tfor _, m := range ms {\n\t\tm.Ack()\n\t}\n\tl.serving.RLock()\n\tdefer l.serving.RUnlock()\n\tif ctx.Err() != nil {\n\t\treturn // stopping: not decided\n",
		pkgs: []string{"./mqttlink"}, run: "TestUndecidedCommandDeliveredAgain",
	},
	{
		name: "actuator-order-lost",
		why:  "each command is handled in a goroutine of its own: one actuator's commands can overtake each other",
		file: "mqttlink/delivery.go",
		old:  "\t\tif work.put(name, m) {\n",
		new:  "\t\tif _, known := work.queues[name]; known && name != \"\" {\n\t\t\tgo l.serve(ctx, name, []mqtt.Message{m})\n\t\t\treturn\n\t\t}\n\t\tif work.put(name, m) {\n",
		pkgs: []string{"./mqttlink"}, run: "TestActuatorOrder",
	},
	{
		name: "backlog-never-refetched",
		why:  "commands dropped from a full backlog wait for a reconnect that may never come: the link does not reconnect to receive them again",
		file: "mqttlink/delivery.go",
		old:  "if n := work.done(ds); n > 0 {",
		new:  "if n := work.done(ds); n < 0 {",
		pkgs: []string{"./mqttlink"}, run: "TestFullQueueDoesNotStall",
	},
	{
		name: "refetch-close-unseen",
		why:  "the link closes its connection to receive dropped commands again, but paho, reading \"use of closed network connection\", takes it for its own disconnect and notices nothing until a keepalive fails",
		file: "mqttlink/limit.go",
		old:  "\tc.aborted.Store(&err)\n",
		new:  "",
		pkgs: []string{"./mqttlink"}, run: "TestAbortedConnSaysWhy",
	},
	{
		name: "claim-by-wall-clock",
		why:  "a same-host claim is judged by start times computed from the wall clock: after NTP steps the clock, a running gateway with the same id is taken for ended",
		file: "mqttlink/instance.go",
		old:  "if me := g.l.claim; c.Boot != \"\" && me.Boot != \"\" {",
		new:  "if me := g.l.claim; false && c.Boot != \"\" && me.Boot != \"\" {",
		pkgs: []string{"./mqttlink"}, run: "TestClaimJudgedByBootAndTicks",
	},
	{
		name: "session-commands-forgotten",
		why:  "the commands a reconnected session delivers before paho runs the connect handler are forgotten as proof of delivery: a broker with a full queue drops the probe, and the gateway never comes online",
		file: "mqttlink/connect.go",
		old:  "\t\tl.probeGot = nil\n\t\tif l.connEnd != nil {\n",
		new:  "\t\tl.sawCommand, l.probeGot = false, nil\n\t\tif l.connEnd != nil {\n",
		pkgs: []string{"./mqttlink"}, run: "TestSessionCommandsProveDelivery",
	},
	{
		name: "no-default-publish-handler",
		why:  "commands the broker delivers again from the session before the subscription is in place are dropped",
		file: "mqttlink/connect.go",
		old:  "\tco.SetDefaultPublishHandler(dispatch)\n",
		new:  "",
		pkgs: []string{"./mqttlink"}, run: "TestUndecidedCommandDeliveredAgain",
	},
	// Reliability under faults: the controller side.
	{
		name: "client-does-not-resend",
		why:  "package client never publishes an unanswered command again: commands published while the gateway was stopped cleanly are lost",
		file: "client/send.go",
		old:  "\tif cl.resend < 0 {\n",
		new:  "\tif true || cl.resend < 0 {\n",
		pkgs: []string{"./tests/torture"}, run: "^TestTorture$",
	},
	{
		name: "client-matches-id-only",
		why:  "client.Send takes an answer with its command's id for another actuator or pair",
		file: "client/send.go",
		old:  "w := cl.expect(c.ID, func(r fence.Result) bool { return Answers(c, r) }, false)",
		new:  "w := cl.expect(c.ID, nil, false)",
		pkgs: []string{"./client"}, run: "TestSendMatchesActuatorAndPair",
	},
	{
		name: "reply-topic-unchecked",
		why:  "a command's reply topic is taken as it comes: the gateway publishes answers on wildcards, on others' topics, on its own command topics",
		file: "mqttlink/serve.go",
		old:  "\tif rerr := l.t.CheckReply(r.Reply); rerr != nil {\n",
		new:  "\tif rerr := error(nil); rerr != nil {\n",
		pkgs: []string{"./mqttlink"}, run: "TestAnswersGoWhereTheCommandSays",
	},
	{
		name: "answers-on-shared-topic",
		why:  "the gateway answers every command on the actuator's shared result topic, whatever reply topic it names: each answer reaches every controller of the actuator",
		file: "mqttlink/serve.go",
		old:  "\treturn r.Command, r.Reply, reason, err\n",
		new:  "\treturn r.Command, to, reason, err\n",
		pkgs: []string{"./mqttlink", "./client"}, run: "TestAnswersGoWhereTheCommandSays|TestEachControllerHearsItsOwnAnswers",
	},
	{
		name: "client-names-no-reply",
		why:  "package client sends commands without its reply topic: their answers go to the shared result topic, to every controller of the actuator, and not to it",
		file: "client/send.go",
		old:  "wire.EncodeChecked(wire.Request{Command: c, Reply: cl.reply})",
		new:  "wire.EncodeChecked(wire.Request{Command: c})",
		pkgs: []string{"./client"}, run: "TestEachControllerHearsItsOwnAnswers",
	},
	{
		name: "acl-controller-reads-all-answers",
		why:  "the broker ACL of docs/security.md lets every controller read every controller's answers",
		file: "docs/security.md",
		old:  "pattern read fencegate/+/reply/%u/#\n",
		new:  "pattern read fencegate/+/reply/#\n",
		pkgs: []string{"./service"}, run: "TestBrokerACL",
	},
	{
		name: "deaf-connection-kept",
		why:  "the link stays on a connection on which the broker delivers nothing, not even its own claim: it never takes commands again",
		file: "mqttlink/connect.go",
		old:  "\t\t\tl.redial(err) // the next connection establishes itself\n",
		new:  "",
		pkgs: []string{"./mqttlink"}, run: "TestDeafConnectionRedialed",
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

func TestMutantsAreCaught(t *testing.T) {
	if os.Getenv("FENCEGATE_MUTANTS") != "1" {
		t.Skip("set FENCEGATE_MUTANTS=1 (make mutants) to run the mutation tests")
	}
	root, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Fatalf("git: %v", err)
	}
	top := strings.TrimSpace(string(root))
	only := regexp.MustCompile(os.Getenv("FENCEGATE_MUTANTS_ONLY"))
	runs := defaultRuns
	if v := os.Getenv("FENCEGATE_MUTANT_RUNS"); v != "" {
		if runs, err = strconv.Atoi(v); err != nil || runs < 1 {
			t.Fatalf("FENCEGATE_MUTANT_RUNS=%q: want a number of runs, 1 or more", v)
		}
	}
	start := time.Now()
	var mu sync.Mutex
	report := make([]string, len(mutants)) // in the list's order, whatever order they end in
	t.Run("each", func(t *testing.T) {
		// Workers, not t.Parallel: parallel subtests start in no set
		// order, and one of the slow mutants started last would run
		// alone at the end. The workers take them slowest first.
		queue := make(chan int)
		var wg sync.WaitGroup
		for range parallel() {
			wg.Go(func() {
				for i := range queue {
					m := mutants[i]
					t.Run(m.name, func(t *testing.T) {
						n := m.runs
						if n == 0 {
							n = runs
						}
						began := time.Now()
						caught, built := catch(t, top, m, n)
						line := fmt.Sprintf("%-32s caught %2d/%-2d %6.1fs (build %5.1fs)", m.name, caught, n, time.Since(began).Seconds(), built.Seconds())
						mu.Lock()
						report[i] = line
						mu.Unlock()
					})
				}
			})
		}
		for _, i := range slowFirst() {
			if only.MatchString(mutants[i].name) {
				queue <- i
			}
		}
		close(queue)
		wg.Wait()
	})
	mu.Lock()
	defer mu.Unlock()
	report = slices.DeleteFunc(report, func(s string) bool { return s == "" })
	t.Logf("mutants (caught/run: every run must fail):\n%s\n%d mutants in %.0fs", strings.Join(report, "\n"), len(report), time.Since(start).Seconds())
}

// parallel is how many mutants run at once: go test's -parallel (make
// mutants: 2).
func parallel() int {
	return flag.Lookup("test.parallel").Value.(flag.Getter).Get().(int)
}

// slowPackages are the test packages whose mutants take longest, the
// slowest first: piemu boots an emulated Raspberry Pi, the torture stops a
// gateway 50 times, cmd/gateway links the largest test binary and builds
// a gateway in each run.
var slowPackages = []string{"./piemu", "./tests/torture", "./cmd/gateway"}

// slowFirst is the order the mutants start in: the indices of mutants, by
// the slowest package among their tests (slowPackages), then by their
// number of runs, both decreasing; else in the list's order.
func slowFirst() []int {
	rank := func(m mutant) int {
		r := len(slowPackages)
		for _, p := range m.pkgs {
			if i := slices.Index(slowPackages, p); i >= 0 {
				r = min(r, i)
			}
		}
		return r
	}
	order := make([]int, len(mutants))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		ma, mb := mutants[a], mutants[b]
		if c := rank(ma) - rank(mb); c != 0 {
			return c
		}
		return max(mb.runs, defaultRuns) - max(ma.runs, defaultRuns)
	})
	return order
}

// catch builds the mutant m's test binaries in a copy of the tree at top
// and runs them n times, each time in a process of its own; it returns in
// how many runs they failed and how long the build took, and fails t unless
// they failed in all of them.
func catch(t *testing.T, top string, m mutant, n int) (int, time.Duration) {
	began := time.Now()
	dir := t.TempDir()
	extract(t, top, dir)
	apply(t, dir, m.file, m.old, m.new)
	for _, e := range m.more {
		apply(t, dir, e.file, e.old, e.new)
	}
	type binary struct{ pkg, path string }
	var bins []binary
	for i, pkg := range m.pkgs {
		bin := filepath.Join(dir, fmt.Sprintf(".mutant-%d.test", i))
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		cmd := exec.CommandContext(ctx, "go", "test", "-c", "-race", "-o", bin, pkg)
		cmd.Dir = dir
		cmd.Env = trimpathEnv(t)
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("mutant %s does not compile (go test -c %s); fix the mutant:\n%s", m.name, pkg, out)
		}
		if _, err := os.Stat(bin); err != nil {
			t.Fatalf("mutant %s: package %s has no tests", m.name, pkg)
		}
		bins = append(bins, binary{pkg, bin})
	}
	built := time.Since(began)
	caught := 0
	var passed string // the output of a run that passed
	for run := 1; run <= n; run++ {
		failed, ran := false, false
		var outs []string
		for _, b := range bins {
			ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
			cmd := exec.CommandContext(ctx, b.path, "-test.run", m.run, "-test.count=1", "-test.timeout=5m")
			cmd.Dir = filepath.Join(dir, b.pkg)        // where go test runs a package's tests
			cmd.Env = append(trimpathEnv(t), m.env...) // trimpath: for the go builds of the tests themselves
			out, err := cmd.CombinedOutput()
			cancel()
			outs = append(outs, fmt.Sprintf("%s: %s", b.pkg, out))
			if !bytes.Contains(out, []byte("testing: warning: no tests to run")) {
				ran = true
			}
			if err == nil {
				continue
			}
			if !failedByATest(out) {
				t.Fatalf("mutant %s: run %d of %s failed outside any test (%v); fix the mutant or the setup:\n%s", m.name, run, b.pkg, err, out)
			}
			failed = true
		}
		if !ran {
			t.Fatalf("mutant %s: -run %q matches no test in %s", m.name, m.run, strings.Join(m.pkgs, " "))
		}
		if failed {
			caught++
			if os.Getenv("FENCEGATE_MUTANT_SHOW") == "1" {
				t.Logf("run %d failed as it must:\n%s", run, strings.Join(outs, "\n"))
			}
		} else {
			passed = strings.Join(outs, "\n")
		}
	}
	switch {
	case caught == 0:
		t.Errorf("mutant %s (%s) survived: go test -run %q %s passed %d of %d runs\n%s", m.name, m.why, m.run, strings.Join(m.pkgs, " "), n, n, passed)
	case caught < n:
		t.Errorf("mutant %s (%s) caught in only %d of %d runs: the tests %q depend on timing; force the interleaving with a hook\n%s",
			m.name, m.why, caught, n, m.run, passed)
	default:
		t.Logf("caught %d/%d: %s (%s)", caught, n, m.name, m.why)
	}
	return caught, built
}

// failedByATest reports whether a test binary's output shows a test that
// failed (a failed check, a panic, a data race, a timeout), not a setup
// that failed before any test ran.
func failedByATest(out []byte) bool {
	for _, s := range []string{"--- FAIL:", "panic:", "WARNING: DATA RACE", "test timed out"} {
		if bytes.Contains(out, []byte(s)) {
			return true
		}
	}
	return false
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

// trimpathEnv is the environment with -trimpath added to GOFLAGS. Each
// mutant is a copy of the tree in a directory of its own, and without
// -trimpath the build cache keys every package of the module on its
// directory: each mutant would compile the whole module again, and so would
// each go build its tests run (the gateway, brokerd). With it, only the
// mutated package and what its change reaches are compiled again.
func trimpathEnv(t *testing.T) []string {
	t.Helper()
	goflagsOnce.Do(func() {
		out, err := exec.Command("go", "env", "GOFLAGS").Output()
		goflags, goflagsErr = strings.TrimSpace(string(out)), err
	})
	if goflagsErr != nil {
		t.Fatalf("go env GOFLAGS: %v", goflagsErr)
	}
	return append(os.Environ(), "GOFLAGS="+strings.TrimSpace(goflags+" -trimpath"))
}

var (
	goflagsOnce sync.Once
	goflags     string
	goflagsErr  error
)
