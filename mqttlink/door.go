package mqttlink

import "context"

// waitReady waits until commands are taken; false if ctx ended first.
func (l *Link) waitReady(ctx context.Context) bool {
	for {
		if ctx.Err() != nil {
			return false
		}
		l.mu.Lock()
		ready, refusing := l.ready, l.refusing
		l.mu.Unlock()
		if refusing {
			if testHookParked != nil {
				testHookParked()
			}
			<-ctx.Done()
			return false
		}
		select {
		case <-ready:
			if l.open() && ctx.Err() == nil {
				return true
			}
		case <-ctx.Done():
			return false
		}
	}
}

// open reports whether commands are taken right now.
func (l *Link) open() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.refusing {
		return false
	}
	select {
	case <-l.ready:
		return true
	default:
		return false
	}
}

// closeDoor stops taking commands for good (another process serves the
// gateway id): commands that have not reached the core stay undecided and
// unacknowledged.
func (l *Link) closeDoor() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.refusing = true
	select {
	case <-l.ready:
		l.ready = make(chan struct{})
	default:
	}
}
