package mutants

func init() {
	mutants = append(mutants, mutant{
		name: "late-write-not-settled",
		why:  "a Modbus write that timed out is not settled before the next request to its device: a newer command's write, on a new connection, goes ahead of it, and the older write lands after it (issue 33)",
		file: "modbusio/modbusio.go",
		old:  "\t\tb.pending = &lateWrite{",
		new:  "\t\to.maybeLate = &lateWrite{",
		pkgs: []string{"./modbusio"}, run: "TestLateWriteNeverAfterNewer",
	})
}
