package sim

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/fencegate/fencegate/httpapi"
	"github.com/fencegate/fencegate/scenario"
)

func (s *Sim) serveEvents(w http.ResponseWriter, r *http.Request) {
	ch, cancel := s.hub.subscribe()
	defer cancel()
	httpapi.ServeEvents(w, r, ch)
}

func (s *Sim) startScenario(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if !slices.Contains(scenario.Names(), name) {
		http.Error(w, fmt.Sprintf("unknown scenario %q", name), http.StatusNotFound)
		return
	}
	s.mu.Lock()
	if s.running != "" {
		running := s.running
		s.mu.Unlock()
		http.Error(w, fmt.Sprintf("scenario %s is running; wait for its verdict", running), http.StatusConflict)
		return
	}
	s.running = name
	s.mu.Unlock()
	go func() {
		defer func() {
			s.mu.Lock()
			s.running = ""
			s.mu.Unlock()
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		scenario.Run(ctx, name, scenario.Env{SimURL: "http://" + s.HTTPAddr, Delay: s.opts.StepDelay})
	}()
	w.WriteHeader(http.StatusAccepted)
}

// hub fans simulator events out to the dashboard's streams.
type hub struct {
	mu   sync.Mutex
	subs map[chan httpapi.Event]struct{}
}

func newHub() *hub { return &hub{subs: map[chan httpapi.Event]struct{}{}} }

func (h *hub) subscribe() (<-chan httpapi.Event, func()) {
	ch := make(chan httpapi.Event, 64)
	h.mu.Lock()
	h.subs[ch] = struct{}{}
	h.mu.Unlock()
	return ch, func() {
		h.mu.Lock()
		delete(h.subs, ch)
		h.mu.Unlock()
	}
}

func (h *hub) send(name string, data any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.subs {
		select {
		case ch <- httpapi.Event{Name: name, Data: data}:
		default:
		}
	}
}
