package mqttbroker

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"syscall"
)

// connLog is the broker's log handler. mochi logs every client connection
// that ends with an error as a warning without a message (listeners'
// Serve: Warn("", "error", err)), and most ends are errors to it: a client
// that closes its socket without DISCONNECT (EOF, a reset), a port probe
// that never sends CONNECT, every client at Close (the closed listener).
// connLog names the record, and logs those ordinary ends at debug level; a
// connection that failed for another reason (a protocol violation, an
// oversized packet) stays a warning.
type connLog struct{ slog.Handler }

func (h connLog) Handle(ctx context.Context, r slog.Record) error {
	if r.Message != "" {
		return h.Handler.Handle(ctx, r)
	}
	var err error
	r.Attrs(func(a slog.Attr) bool {
		if e, ok := a.Value.Any().(error); ok && a.Key == "error" {
			err = e
		}
		return true
	})
	level, msg := slog.LevelWarn, "client connection failed"
	if connEnded(err) {
		level, msg = slog.LevelDebug, "client connection ended"
	}
	if !h.Handler.Enabled(ctx, level) {
		return nil
	}
	named := slog.NewRecord(r.Time, level, msg, r.PC)
	r.Attrs(func(a slog.Attr) bool {
		named.AddAttrs(a)
		return true
	})
	return h.Handler.Handle(ctx, named)
}

func (h connLog) WithAttrs(as []slog.Attr) slog.Handler { return connLog{h.Handler.WithAttrs(as)} }
func (h connLog) WithGroup(name string) slog.Handler    { return connLog{h.Handler.WithGroup(name)} }

// connEnded reports the errors with which a client's connection ends in
// ordinary use.
func connEnded(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}
