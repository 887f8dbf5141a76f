# fencegate — see README.md.
GO      ?= go
BIN     ?= bin/gateway
PKGS    ?= ./...

.PHONY: mutants all build test test-short lint fuzz bench screenshot scenarios sim clean

all: build

## build: the gateway binary, in bin/
build:
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN) ./cmd/gateway

## test: every test, with the race detector (CI=true makes missing programs fail instead of skip)
test:
	$(GO) test -race -count=1 $(PKGS)

## test-short: the tests without the race detector, faster on a laptop
test-short:
	$(GO) test -count=1 $(PKGS)

## lint: gofmt -s and go vet, both must be clean
lint:
	@out=$$(gofmt -s -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt -s would change:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GO) vet -tags failpoints ./cmd/gateway

## fuzz: a short run of each fuzz target
fuzz:
	$(GO) test ./mqttlink -run '^$$' -fuzz FuzzDecodeCommand -fuzztime 30s

## bench: the fence store against the disk's commit floor, and commands against the broker's own round trip, in the same run
bench:
	$(GO) test ./fencelog ./service -run '^$$' -bench . -benchtime 2s

## screenshot: refresh docs/dashboard.png from the browser test (needs chromium)
screenshot:
	FENCEGATE_SCREENSHOT=$(CURDIR)/docs/dashboard.png $(GO) test ./cmd/gateway -run TestDashboardInBrowser -count=1

## scenarios: play every simulator scenario on its own simulator
scenarios: build
	for s in paused-controller duplicate-delivery crash-and-reconcile unfenced; do \
	  $(BIN) sim scenario $$s --sim http://127.0.0.1:1 --delay 0 || exit 1; done

## mutants: deliberately broken variants of the safety core; the tests must catch each one
mutants:
	FENCEGATE_MUTANTS=1 $(GO) test -count=1 -v -timeout 30m ./internal/mutants

## sim: the simulator with an embedded broker (MQTT on 127.0.0.1:1883, API on 127.0.0.1:8080)
sim:
	$(GO) run ./cmd/gateway sim

clean:
	rm -rf bin
