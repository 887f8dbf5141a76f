package mutants

// A controller's lease-bound send: the Go client checks the lease just
// before each publish, and the lease's deadline counts from the send
// time of the last keep-alive etcd answered. Each mutant undoes one part.
func init() {
	mutants = append(mutants,
		mutant{
			name: "send-under-unchecked",
			why:  "SendUnder publishes without checking the lease: a Go controller paused past its lease after it decided publishes under its old token",
			file: "client/send.go",
			old: `	if g != nil {
		if err := g.Check(); err != nil {`,
			new: `	if false {
		if err := g.Check(); err != nil {`,
			pkgs: []string{"./client"}, run: "TestSendUnderALostLeasePublishesNothing",
		},
		mutant{
			name: "send-under-resends-lost",
			why:  "SendUnder goes on resending its command after the lease was lost: copies under the old token keep reaching the broker",
			file: "client/send.go",
			old:  `(n == 0 || g.Check() == nil)`,
			new:  `(n >= 0 || g.Check() == nil)`,
			pkgs: []string{"./client"}, run: "TestSendUnderStopsResendingOnceLost",
		},
		mutant{
			name: "lease-deadline-from-answer",
			why:  "the lease's deadline counts from a keep-alive's answer, not its send: a slow answer makes the holder believe it holds the lease for up to a round trip after etcd may let it expire",
			file: "lease/helduntil.go",
			old:  `			d.extend(sent, ttl)`,
			new:  `			d.extend(sent.Add(time.Since(sent)), ttl)`,
			pkgs: []string{"./lease"}, run: "TestDeadlineFromTheLastAnsweredKeepAliveSent",
		},
		mutant{
			name: "lease-late-answer-counts",
			why:  "a keep-alive answered after the deadline moves it on: a holder that paused past its lease takes it as held again",
			file: "lease/helduntil.go",
			old:  `if d.why == "" && time.Now().Before(d.at) && sent.Add(ttl).After(d.at) {`,
			new:  `if d.why == "" && sent.Add(ttl).After(d.at) {`,
			pkgs: []string{"./lease"}, run: "TestAnswerAfterTheDeadlineDoesNotCount",
		},
	)
}

// paho publishes its unacknowledged copies again after a reconnect, by
// itself: SendUnder's are kept from that once their lease is lost.
func init() {
	mutants = append(mutants, mutant{
		name: "replay-under-lost-lease",
		why:  "paho's store gives back every unacknowledged copy after a reconnect: a command published under a lease while the broker hung goes out again after the lease was lost",
		file: "client/store.go",
		old:  `	if gs != nil && (over || gs.g.Check() != nil) {`,
		new:  `	if false && gs != nil && (over || gs.g.Check() != nil) {`,
		pkgs: []string{"./client"}, run: "TestNoReplayUnderALostLease",
	})
}
