package bench

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// progress draws a one-line progress bar on a terminal: the step of the
// run, and how far the current step is (by time or by answers). Without a
// terminal it only counts answers.
type progress struct {
	w        io.Writer
	steps    int
	answered atomic.Int64

	mu    sync.Mutex
	step  int
	label string
	since time.Time
	from  int64 // answers at the start of the step
	lim   limit

	stop chan struct{}
	wg   sync.WaitGroup
}

func newProgress(w io.Writer, steps int) *progress {
	p := &progress{w: w, steps: max(steps, 1), stop: make(chan struct{})}
	if w != nil {
		p.wg.Add(1)
		go p.draw()
	}
	return p
}

// next starts the next step, which ends at l's deadline or after l's count
// of answers (neither: a step of unknown length).
func (p *progress) next(label string, l limit) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.step++
	p.label, p.since, p.lim, p.from = label, time.Now(), l, p.answered.Load()
}

// relabel changes the current step's label.
func (p *progress) relabel(label string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.label = label
}

// answer counts one answer.
func (p *progress) answer() { p.answered.Add(1) }

// count returns the answers counted so far.
func (p *progress) count() int { return int(p.answered.Load()) }

// done clears the bar.
func (p *progress) done() {
	if p.w == nil {
		return
	}
	close(p.stop)
	p.wg.Wait()
	fmt.Fprint(p.w, "\r\x1b[K")
}

func (p *progress) draw() {
	defer p.wg.Done()
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
		}
		p.mu.Lock()
		step, label, lim, since, from := p.step, p.label, p.lim, p.since, p.from
		p.mu.Unlock()
		frac := 0.0
		switch {
		case lim.count > 0:
			frac = float64(p.answered.Load()-from) / float64(lim.count)
		case !lim.deadline.IsZero():
			frac = float64(time.Since(since)) / float64(lim.deadline.Sub(since))
		}
		frac = min(max(frac, 0), 1)
		const width = 30
		done := int((float64(max(step-1, 0)) + frac) / float64(p.steps) * width)
		done = min(max(done, 0), width)
		fmt.Fprintf(p.w, "\r\x1b[K[%s%s] %d/%d %s %3.0f%%", strings.Repeat("=", done), strings.Repeat(" ", width-done),
			min(step, p.steps), p.steps, label, frac*100)
	}
}

// plan counts the steps of a run, for the progress bar.
func (o *Options) plan() int {
	if o.soakOnly() {
		return 3 // start, warm-up, soak
	}
	steps := 3 // commit floor; round trip floor: warm-up, measure
	if slices.Contains(o.Profiles, Single) {
		steps += 2 // the round trip with a commit: warm-up, measure
	}
	echoes := map[topology]bool{{1, 1, 0}: true}
	for _, p := range o.Profiles {
		if p == SDCard && !o.CommitDelay {
			continue
		}
		for _, size := range o.sizes(p) {
			n, m, w := o.shape(p, size)
			tp := topology{m, w, 0}
			if p == Shared {
				tp.shared = n
			}
			if p != Storm && !echoes[tp] {
				echoes[tp] = true
				steps += 2
			}
			steps += 3 // start, warm-up, measure
			if p == Storm {
				steps += 2 // the storm, stale commands alone
			}
		}
	}
	return steps
}
