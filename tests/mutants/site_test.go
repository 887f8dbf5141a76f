package mutants

// A Pi on a site: the bridge to the site's broker carries each of the
// gateway's topics one way, and a claim that a site broker hands back
// from a run that has ended is no second gateway.
func init() {
	mutants = append(mutants,
		mutant{
			name: "bridge-states-both-ways",
			why:  "the bridge carries the gateway's states both ways: after each reconnect the site's older retained copies come back into the Pi's broker, and the next reconnect sends them out as the newest",
			file: "sitebridge/conf.go",
			old:  `{t.StateFilter(), "out"},`,
			new:  `{t.StateFilter(), "both"},`,
			pkgs: []string{"./sitebridge"}, run: "TestConf",
		},
		mutant{
			name: "ended-claim-is-a-conflict",
			why:  "a claim of an ended process of this host, handed back by a bridge's site broker after the link returns, is taken for a second gateway: a gateway restarted while its link was down stops for good (exit 78)",
			file: "mqttlink/instance.go",
			old:  `	case g.aliveness(c) == ended:`,
			new:  `	case false:`,
			pkgs: []string{"./mqttlink"}, run: "TestEndedClaimAfterOwnIsNoConflict",
		},
	)
}
