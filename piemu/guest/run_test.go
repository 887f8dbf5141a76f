//go:build linux

package guest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/fencegate/fencegate/config"
	"github.com/fencegate/fencegate/mqttbroker"
	"github.com/fencegate/fencegate/service"
)

// guestBroker starts an embedded broker for the test, closed when it
// ends, and returns its URL.
func guestBroker(t *testing.T) string {
	t.Helper()
	broker, err := mqttbroker.Start("127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { broker.Close() })
	return broker.URL()
}

// runGateway runs service.Run with cfg (creating its store if init) until
// it is ready, and returns what it says and a stop that ends it and waits
// for it; the stop also runs when the test ends, so that a failed test
// does not leave lines held for the next.
func runGateway(t *testing.T, cfg *config.Config, init bool) (service.Info, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan service.Info, 1)
	done := make(chan error, 1)
	go func() {
		done <- service.Run(ctx, cfg, service.Options{Init: init, Ready: func(i service.Info) { ready <- i }})
	}()
	var info service.Info
	select {
	case info = <-ready:
	case err := <-done:
		cancel()
		t.Fatalf("service.Run: %v", err)
	case <-time.After(60 * time.Second):
		cancel()
		t.Fatal("gateway not ready within 60 s")
	}
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("service.Run returned %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Error("service.Run did not return within 30 s of cancel")
			}
		})
	}
	t.Cleanup(stop)
	return info, stop
}
