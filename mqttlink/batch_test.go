package mqttlink

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/tests/testctl"
	"github.com/fencegate/fencegate/tests/testenv"
	"github.com/fencegate/fencegate/wire"
)

// batchHandler decides commands as countHandler does and records the
// batches it was given.
type batchHandler struct {
	countHandler
	max     int // MaxBatch's answer; 0: 64
	mu      sync.Mutex
	batches [][]string
}

func (h *batchHandler) MaxBatch(string) int {
	if h.max == 0 {
		return 64
	}
	return h.max
}

func (h *batchHandler) HandleBatch(ctx context.Context, cmds []fence.Command) ([]fence.Result, error) {
	var ids []string
	var res []fence.Result
	for _, c := range cmds {
		ids = append(ids, c.ID)
		res = append(res, h.countHandler.apply(c))
	}
	h.mu.Lock()
	h.batches = append(h.batches, ids)
	h.mu.Unlock()
	return res, nil
}

// TestQueuedCommandsGoTogether: the commands of an actuator that queued
// while its worker was busy go to the core in one batch, in their order of
// arrival (hooks hold the worker on the first, published alone, until the
// others are queued behind it); a malformed one among them is rejected in its turn and splits
// the batch. Every one is answered and acknowledged: a link that starts
// next on the same session is given none of them again.
func TestQueuedCommandsGoTogether(t *testing.T) {
	for _, tt := range []struct {
		max  int
		want string
	}{
		{0, "[[q-0] [q-1 q-2] [q-4 q-5]]"},
		// A handler that takes one at a time (an interlocked output) is
		// given one at a time, so that the link looks at its door and
		// its context between them.
		{1, "[[q-0] [q-1] [q-2] [q-4] [q-5]]"},
	} {
		t.Run(fmt.Sprint("max ", tt.max), func(t *testing.T) { queuedTogether(t, tt.max, tt.want) })
	}
}

func queuedTogether(t *testing.T, max int, want string) {
	broker := testenv.EmbeddedBroker(t)
	topics := wire.Topics{GatewayID: testenv.ID(t, "batch")}
	ids := []string{"q-0", "q-1", "q-2", "bad", "q-4", "q-5"}
	queued := make(chan struct{})
	var n int
	testHookQueued = func(string, []byte) {
		if n++; n == len(ids) {
			close(queued)
		}
	}
	taken := make(chan struct{})
	var takenOnce sync.Once
	testHookServe = func(_ string, payload []byte) {
		if idOf(payload) == "q-0" {
			takenOnce.Do(func() { close(taken) })
			select { // hold the worker until all are queued behind q-0
			case <-queued:
			case <-time.After(20 * time.Second):
			}
		}
	}
	t.Cleanup(func() { testHookQueued, testHookServe = nil, nil }) // after the link stops
	h := &batchHandler{max: max}
	o := Options{Broker: broker, Topics: topics, Actuators: []string{"a"}, Store: "s"}
	l := startLink(t, o, h)
	ctl := testctl.Connect(t, broker, topics)
	for i, id := range ids {
		payload := wire.EncodeCommand(command(id, uint64(i+1)))
		if id == "bad" {
			payload = []byte(`{"id":"bad","token":"x"}`)
		}
		ctl.Publish(t, "a", payload, false)
		if i == 0 {
			// q-0 alone: the others are published once the worker took it.
			select {
			case <-taken:
			case <-time.After(20 * time.Second):
				t.Fatal("the worker did not take q-0")
			}
		}
	}
	for _, id := range ids {
		res := ctl.Result(t, id)
		want := fence.Applied
		if id == "bad" {
			want = fence.Rejected
		}
		if res.Outcome != want {
			t.Errorf("%s answered %v (%s), want %v", id, res.Outcome, res.Error, want)
		}
	}
	h.mu.Lock()
	got := fmt.Sprint(h.batches)
	h.mu.Unlock()
	if got != want {
		t.Errorf("the core was given %s, want %s", got, want)
	}
	if err, _ := l.stop(t, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	next := &batchHandler{max: max}
	startLink(t, o, next)
	if res := ctl.Send(t, command("q-6", 7)); res.Outcome != fence.Applied {
		t.Fatalf("q-6: %+v", res)
	}
	next.mu.Lock()
	defer next.mu.Unlock()
	if all := slices.Concat(next.batches...); !slices.Equal(all, []string{"q-6"}) {
		t.Errorf("the next link was given %v, want only q-6: the others were answered but not all acknowledged", all)
	}
}
