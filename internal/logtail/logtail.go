// Package logtail keeps the end of a process's output, to quote in an
// error when the process fails: bounded, whatever the process writes.
package logtail

import "sync"

// Buffer is a writer that keeps the last Max bytes written to it. It is
// safe for concurrent use.
type Buffer struct {
	Max int

	mu  sync.Mutex
	buf []byte
}

// Write implements io.Writer; it never fails.
func (w *Buffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	if over := len(w.buf) - w.Max; over > 0 {
		w.buf = append(w.buf[:0], w.buf[over:]...)
	}
	return len(p), nil
}

// Tail returns what w keeps, and whether it is full (earlier output may
// have been dropped).
func (w *Buffer) Tail() (text string, full bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return string(w.buf), len(w.buf) == w.Max
}
