package boards

import (
	"fmt"

	"github.com/fencegate/fencegate/boards/pinmap"
)

// inputWatch turns one input request's edge events into reported changes.
// Only its goroutine (RaspberryPi.watch) uses it.
type inputWatch struct {
	lines    []inputLine    // in request order
	byOffset map[uint32]int // a line's offset on its chip → its index in lines
	last     []bool         // each line's level as the events tell it
}

// newInputWatch watches a chip's inputs, whose levels (bit i: line i of
// the request) were read right after the request.
func newInputWatch(g *chipLines, levels uint64) *inputWatch {
	w := &inputWatch{lines: g.inputs, byOffset: map[uint32]int{}, last: make([]bool, len(g.inputs))}
	for i, off := range g.offsets {
		w.byOffset[off] = i
		w.last[i] = levels&(1<<i) != 0
	}
	return w
}

// change returns the change an event reports, if any: none for a line
// the request does not have, for an edge to the level the line already
// has (the kernel's event buffer, when full, drops the oldest events, so
// the last edge read is always the line's last), or for an edge the
// line's Edge does not report.
func (w *inputWatch) change(e gpioV2LineEvent) (InputEvent, bool) {
	i, ok := w.byOffset[e.offset]
	if !ok || (e.id != gpioV2EventRisingEdge && e.id != gpioV2EventFallingEdge) {
		return InputEvent{}, false
	}
	high := e.id == gpioV2EventRisingEdge
	if high == w.last[i] {
		return InputEvent{}, false
	}
	w.last[i] = high
	if !w.lines[i].Edge.reports(high) {
		return InputEvent{}, false
	}
	return InputEvent{Input: w.lines[i].index, High: high, At: eventTime(e.timestampNs)}, true
}

// watch reads req's edge events and reports the changes until req is
// closed.
func (p *RaspberryPi) watch(req *lineRequest, w *inputWatch) {
	defer p.watchers.Done()
	buf := make([]byte, 16*gpioV2LineEventSize)
	for {
		evs, err := req.readEvents(buf)
		if err != nil {
			return // closed; or the chip is gone, which Level says
		}
		for _, e := range evs {
			if ev, ok := w.change(e); ok {
				p.deliver(ev)
			}
		}
	}
}

// deliver calls onInput, one call at a time, never once Close began.
func (p *RaspberryPi) deliver(ev InputEvent) {
	if p.onInput == nil {
		return
	}
	p.deliverMu.Lock()
	defer p.deliverMu.Unlock()
	if p.closed.Load() {
		return
	}
	p.onInput(ev)
}

// Input implements Board.
func (p *RaspberryPi) Input(name string) (Input, error) {
	g, err := pinmap.Canonical(name)
	if err != nil {
		return nil, err
	}
	ref, ok := p.inIndex[g]
	if !ok {
		return nil, fmt.Errorf("boards: %s was not opened as an input", pinmap.Describe(g))
	}
	return &rpiInput{board: p, name: g, ref: ref}, nil
}

// rpiInput is an opened input of the Raspberry Pi.
type rpiInput struct {
	board *RaspberryPi
	name  string
	ref   lineRef
}

func (r *rpiInput) String() string { return r.board.Model.Name + " input " + pinmap.Describe(r.name) }

// Level implements Input: GET_VALUES on the input request, which gives
// the debounced level of a line with a debounce period.
func (r *rpiInput) Level() (bool, error) {
	r.board.mu.Lock()
	defer r.board.mu.Unlock()
	var v uint64
	err := errClosed
	if req := r.board.ins[r.ref.req].req; req != nil {
		v, err = req.get(r.ref.bit)
	}
	if err != nil {
		return false, fmt.Errorf("boards: read input %s: %w", pinmap.Describe(r.name), err)
	}
	return v != 0, nil
}
