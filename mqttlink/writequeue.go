package mqttlink

import (
	"net"
	"os"
	"sync"
	"time"
)

// Outgoing packets. paho writes every packet it sends with a write of its
// own, one after the other from one goroutine: under a load of thousands
// of commands a second that is two system calls per command (its answer,
// then its acknowledgement), a large part of the gateway's CPU time. The
// link's connection queues what paho writes instead, and a goroutine of
// its own writes everything queued with one write: while one write is in
// the kernel, the packets that come meanwhile wait and go together in the
// next. A lone packet waits for no timer: it goes as soon as the writer
// takes it.
//
// The stream keeps paho's order, so a command's acknowledgement, which
// the link gives only after its answer was written (to the queue), still
// reaches the broker after the answer, or is lost with it. A write that
// fails fails every later one, and closes the connection, so paho's reader
// sees the loss at once. Close writes what is queued first (for paho's
// DISCONNECT), waiting at most closeFlushWait.

// writeQueue is the queue of a connection's outgoing bytes.
type writeQueue struct {
	conn net.Conn // written by the writer goroutine alone
	fail func(error)

	mu       sync.Mutex
	changed  chan struct{} // closed and replaced when buf drains, the writer ends or a deadline is set
	wake     chan struct{} // 1-buffered: buf has bytes for the writer
	buf      []byte        // queued, not yet taken by the writer
	spare    []byte        // the writer's last buffer, for reuse
	err      error         // the first failed write; every later Write returns it
	closed   bool
	deadline time.Time // paho's write deadline: a Write waiting for room gives up at it
	done     chan struct{}
}

// maxQueued bounds the queued bytes: a Write that finds the queue full
// waits for room (until the write deadline), as a write to a full socket
// would.
const maxQueued = 256 << 10

// closeFlushWait bounds how long Close waits for queued bytes to be
// written before it closes the connection.
const closeFlushWait = time.Second

// newWriteQueue starts the writer of conn; fail is called once, with the
// error, if a write fails (before the connection is closed).
func newWriteQueue(conn net.Conn, fail func(error)) *writeQueue {
	q := &writeQueue{conn: conn, fail: fail, changed: make(chan struct{}), wake: make(chan struct{}, 1), done: make(chan struct{})}
	go q.run()
	return q
}

// notify wakes every goroutine waiting for a change; q.mu must be held.
func (q *writeQueue) notify() {
	close(q.changed)
	q.changed = make(chan struct{})
}

// write queues p, and returns at once unless the queue is full.
func (q *writeQueue) write(p []byte) (int, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for {
		switch {
		case q.err != nil:
			return 0, q.err
		case q.closed:
			return 0, net.ErrClosed
		case len(q.buf) == 0 || len(q.buf)+len(p) <= maxQueued:
			q.buf = append(q.buf, p...)
			select {
			case q.wake <- struct{}{}:
			default:
			}
			return len(p), nil
		}
		// Full: wait for the writer, until the deadline.
		if !q.deadline.IsZero() && !time.Now().Before(q.deadline) {
			return 0, os.ErrDeadlineExceeded
		}
		changed, deadline := q.changed, q.deadline
		q.mu.Unlock()
		q.wait(changed, deadline)
		q.mu.Lock()
	}
}

// wait waits for changed to close, or until deadline (if not zero).
func (q *writeQueue) wait(changed <-chan struct{}, deadline time.Time) {
	if deadline.IsZero() {
		<-changed
		return
	}
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-changed:
	case <-t.C:
	}
}

// setDeadline sets the deadline of a Write that waits for room.
func (q *writeQueue) setDeadline(t time.Time) {
	q.mu.Lock()
	q.deadline = t
	q.notify()
	q.mu.Unlock()
}

// run is the writer: it writes everything queued, in one write, until the
// queue is closed and drained or a write fails.
func (q *writeQueue) run() {
	defer close(q.done)
	for {
		q.mu.Lock()
		for len(q.buf) == 0 {
			q.notify()
			if q.closed {
				q.mu.Unlock()
				return
			}
			q.mu.Unlock()
			<-q.wake
			q.mu.Lock()
		}
		b := q.buf
		q.buf = q.spare[:0]
		q.notify() // room
		q.mu.Unlock()

		_, err := q.conn.Write(b)

		q.mu.Lock()
		q.spare = b
		if err != nil {
			q.err, q.buf = err, nil
			q.notify()
			q.mu.Unlock()
			q.fail(err)
			return
		}
		q.mu.Unlock()
	}
}

// close stops taking writes and waits, at most closeFlushWait, for the
// writer to write what is queued; the caller then closes the connection
// (which ends a write still in progress).
func (q *writeQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.notify()
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
	t := time.NewTimer(closeFlushWait)
	defer t.Stop()
	select {
	case <-q.done:
	case <-t.C:
	}
}
