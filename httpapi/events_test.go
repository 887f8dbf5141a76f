package httpapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// afterWriter records every write, and fails the test for one made after
// the handler returned.
type afterWriter struct {
	t *testing.T
	*httptest.ResponseRecorder
	mu       sync.Mutex
	returned bool
	late     int
}

func (w *afterWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.returned {
		w.late++
	}
	return w.ResponseRecorder.Write(p)
}

func (w *afterWriter) Flush() {}

// ServeEvents writes nothing after it returned (the
// keep-alive goroutine could): keep-alives and events come from the
// handler's own goroutine.
func TestServeEventsWritesNothingAfterReturn(t *testing.T) {
	old := keepAlive
	keepAlive = time.Millisecond
	defer func() { keepAlive = old }()
	for range 20 {
		w := &afterWriter{t: t, ResponseRecorder: httptest.NewRecorder()}
		ctx, cancel := context.WithCancel(context.Background())
		r := httptest.NewRequest(http.MethodGet, "/api/events", nil).WithContext(ctx)
		events := make(chan Event, 1)
		events <- Event{Name: "decision", Data: map[string]string{"id": "x"}}
		done := make(chan struct{})
		go func() { ServeEvents(w, r, events); close(done) }()
		time.Sleep(10 * time.Millisecond) // several keep-alives
		cancel()
		<-done
		w.mu.Lock()
		w.returned = true
		w.mu.Unlock()
		time.Sleep(10 * time.Millisecond) // time for a stray keep-alive
		w.mu.Lock()
		late, body := w.late, w.Body.String()
		w.mu.Unlock()
		if late != 0 {
			t.Fatalf("%d writes after ServeEvents returned", late)
		}
		if !strings.Contains(body, "event: decision") || !strings.Contains(body, ": keep-alive") {
			t.Fatalf("stream = %q, want the event and keep-alives", body)
		}
	}
}
