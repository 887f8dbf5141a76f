package mutants

// The mutants of hostile input: a command that would make the gateway
// publish what the broker refuses, and the guard that keeps such a
// command from taking the gateway off the broker.
func init() {
	mutants = append(mutants,
		mutant{
			name: "topic-control-chars",
			why:  "the rule for the text of a topic takes control characters: a reply topic holding U+000A is answered on (Mosquitto then closes the gateway's connection; the embedded broker takes it, and the command is applied)",
			file: "wire/topic.go",
			old:  "\tcase r <= 0x1f || r >= 0x7f && r <= 0x9f:",
			new:  "\tcase false:",
			pkgs: []string{"./service"}, run: "TestHostileCommands",
			env: []string{"FENCEGATE_HOSTILE_CASES=1"},
		},
		mutant{
			name: "reply-text-unchecked",
			why:  "the reply check looks at wildcards, levels and length but not at the characters: a command naming a reply topic with a control character is decided and applied",
			file: "wire/reply.go",
			old:  "\tcase CheckTopicText(topic) != nil:",
			new:  "\tcase false:",
			pkgs: []string{"./service"}, run: "TestHostileCommands",
			env: []string{"FENCEGATE_HOSTILE_CASES=1"},
		},
		mutant{
			name: "publish-unchecked",
			why:  "the link publishes on any topic, one the broker refuses too, which costs it the connection",
			file: "mqttlink/sendable.go",
			old:  "\tif err := wire.CheckTopic(topic); err != nil {",
			new:  "\tif err := wire.CheckTopic(topic); false && err != nil {",
			pkgs: []string{"./mqttlink"}, run: "TestSendRefusesWhatTheBrokerWould",
		},
		mutant{
			name: "poison-answered-again",
			why:  "a command whose answer lost the gateway its connection, alone, is answered again each time it comes: the gateway loses every connection to it",
			file: "mqttlink/poison.go",
			old:  "\tcase p, escalated && (s || dup):",
			new:  "\tcase p && false, escalated && (s || dup):",
			pkgs: []string{"./mqttlink"}, run: "TestPoisonMessageDoesNotLoop",
		},
	)
}

// The set-point a device holds at 0: refused, never recorded as on.
func init() {
	mutants = append(mutants, mutant{
		name: "duty-below-step-taken",
		why:  "a set-point above 0 that the device holds at 0 (0.04 % to a 0..1000 register) is recorded and answered on while the output is off",
		file: "actuator/setpoint.go",
		old:  "\tif o.dev != nil && o.dev.Nearest(c.Duty) == 0 {",
		new:  "\tif false && o.dev != nil && o.dev.Nearest(c.Duty) == 0 {",
		pkgs: []string{"./actuator"}, run: "TestSetpointBelowTheDeviceStep",
	})
}

// A burst of poison commands: escalation bounds what it costs.
func init() {
	mutants = append(mutants, mutant{
		name: "poison-burst-not-escalated",
		why:  "two losses on answers alone within a minute change nothing: each poison command of a burst costs a connection, with paho's backoff doubling",
		file: "mqttlink/poison.go",
		old:  "\treturn !g.lostOn[1].IsZero() && g.lostOn[0].Sub(g.lostOn[1]) <= escalateWithin",
		new:  "\treturn false && !g.lostOn[1].IsZero() && g.lostOn[0].Sub(g.lostOn[1]) <= escalateWithin",
		pkgs: []string{"./mqttlink"}, run: "TestPoisonBurstDoesNotLoop",
	})
}

// The decoder's and the topic rules' own checks.
func init() {
	mutants = append(mutants,
		mutant{
			name: "lone-surrogate-taken",
			why:  "a lone surrogate escape in a string field is taken as U+FFFD: a reply topic other than the one sent is answered on, and the command applied",
			file: "wire/command.go",
			old:  "\tif esc, ok := loneSurrogate(raw); ok {",
			new:  "\tif esc, ok := loneSurrogate(raw); false && ok {",
			pkgs: []string{"./wire"}, run: "TestLoneSurrogateRefused",
		},
		mutant{
			name: "long-name-answered",
			why:  "a command to an actuator name of any length is answered: an answer naming a name of 22 KB three times passes a broker's packet limit",
			file: "wire/wire.go",
			old:  "len(name) <= MaxName && ",
			new:  "",
			pkgs: []string{"./wire"}, run: "TestTopicsRefuseUnanswerableNames",
		},
		mutant{
			name: "prefix-text-unchecked",
			why:  "a topic prefix with a control character is taken: every topic of the gateway (or of the Home Assistant bridge) is one the broker refuses",
			file: "wire/topic.go",
			old:  "\treturn CheckTopicText(p)\n}",
			new:  "\treturn nil\n}",
			pkgs: []string{"./config"}, run: "TestParseErrors",
		},
	)
}
