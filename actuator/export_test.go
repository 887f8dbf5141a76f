package actuator

// OnLockWait makes each of b's scopes call f with its name whenever a
// caller finds the scope's lock taken and is about to wait for it. Call it
// before b handles commands.
func OnLockWait(b *Bank, f func(scope string)) {
	for _, sc := range b.scopes {
		sc.waiting = func() { f(sc.name) }
	}
}
