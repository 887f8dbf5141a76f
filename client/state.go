package client

import (
	"context"
	"fmt"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/wire"
)

// State returns the latest retained state seen for actuator.
func (cl *Client) State(actuator string) (fence.Output, bool) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	o, ok := cl.states[actuator]
	return o, ok
}

// WaitState waits until actuator's state satisfies ok.
func (cl *Client) WaitState(ctx context.Context, actuator string, ok func(fence.Output) bool) (fence.Output, error) {
	o, err := waitFor(ctx, cl, cl.states, actuator, ok)
	if err != nil {
		return o, fmt.Errorf("client: state of %s: %w", actuator, err)
	}
	return o, nil
}

// WaitInput waits until the retained level of the gateway's input name
// satisfies ok (nil: any).
func (cl *Client) WaitInput(ctx context.Context, name string, ok func(wire.InputState) bool) (wire.InputState, error) {
	in, err := waitFor(ctx, cl, cl.inputs, name, ok)
	if err != nil {
		return in, fmt.Errorf("client: input %s: %w", name, err)
	}
	return in, nil
}

// waitFor waits until m[key], which cl.mu guards, is there and satisfies
// ok (nil: any); it returns the last value seen and ctx's error if ctx
// ends first.
func waitFor[T any](ctx context.Context, cl *Client, m map[string]T, key string, ok func(T) bool) (T, error) {
	for {
		cl.mu.Lock()
		v, have := m[key]
		ch := cl.changed
		cl.mu.Unlock()
		if have && (ok == nil || ok(v)) {
			return v, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return v, ctx.Err()
		}
	}
}
